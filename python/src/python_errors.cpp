#include "python_errors.hpp"

#include <typeinfo>

#include "kvtier/core/errors.hpp"

namespace nb = nanobind;

namespace kvtier::python {
namespace {

// Created once at import; the module keeps a reference to each.
PyObject* error_type = nullptr;
PyObject* contract_error_type = nullptr;
PyObject* config_error_type = nullptr;
PyObject* allocation_error_type = nullptr;
PyObject* transfer_error_type = nullptr;
PyObject* cuda_error_type = nullptr;
PyObject* invariant_error_type = nullptr;

PyObject* new_type(nb::module_& module, const char* name, nb::handle bases, const char* doc) {
  const std::string qualified = std::string("kvtier.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw nb::python_error();
  module.attr(name) = nb::handle(type);
  return type;
}

void translate(const std::exception_ptr& error, void*) {
  // Most derived first: ContractError and friends are kvtier::Error too.
  try {
    std::rethrow_exception(error);
  } catch (const ContractError& e) {
    PyErr_SetString(contract_error_type, e.what());
  } catch (const ConfigError& e) {
    PyErr_SetString(config_error_type, e.what());
  } catch (const AllocationError& e) {
    PyErr_SetString(allocation_error_type, e.what());
  } catch (const TransferError& e) {
    PyErr_SetString(transfer_error_type, e.what());
  } catch (const CudaError& e) {
    PyErr_SetString(cuda_error_type, e.what());
  } catch (const Error& e) {
    PyErr_SetString(error_type, e.what());
  } catch (const InvariantError& e) {
    PyErr_SetString(invariant_error_type, e.what());
  } catch (const std::bad_cast&) {
    // nanobind's cast_error: a value of the wrong type where a binding casts by hand.
    PyErr_SetString(PyExc_TypeError, "kvtier: an argument has the wrong type");
  }
  // Anything else propagates to nanobind's own translators.
}

}  // namespace

void bind_errors(nb::module_& module) {
  error_type = new_type(module, "Error", PyExc_Exception, "Base of the errors kvtier raises.");
  contract_error_type = new_type(module, "ContractError", error_type,
                                 "A call broke an API contract; the manager is left exactly as it was.");
  config_error_type =
      new_type(module, "ConfigError", nb::make_tuple(nb::handle(error_type), nb::handle(PyExc_ValueError)),
               "An impossible or unsupported configuration.");
  allocation_error_type =
      new_type(module, "AllocationError", nb::make_tuple(nb::handle(error_type), nb::handle(PyExc_MemoryError)),
               "Memory could not be allocated.");
  transfer_error_type = new_type(module, "TransferError", error_type, "An asynchronous copy or fill failed.");
  cuda_error_type = new_type(module, "CudaError", error_type, "A CUDA runtime call failed.");
  invariant_error_type = new_type(module, "InvariantError", PyExc_RuntimeError,
                                  "kvtier broke one of its own invariants (a bug, never the caller's fault).");
  nb::register_exception_translator(translate);
}

}  // namespace kvtier::python
