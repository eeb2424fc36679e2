"""kvtier: a real-memory KV-cache block allocator for LLM inference.

A :class:`Manager` owns a pool of real pages (device memory on CUDA, host
memory on the host runtime), a G1 backend (``"native"``, vLLM-style, or
``"kvbm"``) and optionally a G2 pinned-host tier. Requests are driven through
the library's request driver (``add_request``, ``allocate``, ``finalize``,
``generate``, ``finish``, ``preempt``); block tables and each layer's K/V
come out as DLPack tensors without a copy; KV events as dicts (``events()``,
``take_events()``, callbacks) or on the wire (``ZmqEventPublisher``).
See docs/python.md.
"""

from ._kvtier import (  # noqa: F401  (re-exported)
    Acquire,
    AllocationError,
    ConfigError,
    ContractError,
    CudaError,
    DecodeReservation,
    DecodeStep,
    DestinationReservation,
    Error,
    InvariantError,
    Manager,
    PrefillCost,
    PrefixPins,
    Request,
    TransferError,
    cuda_compiled,
    cuda_device_count,
    has_zmq,
    model_layers,
    page_pattern,
)

if has_zmq:
    from ._kvtier import ZmqEventPublisher  # noqa: F401

__version__ = "0.1.0"

__all__ = [
    "Acquire",
    "AllocationError",
    "ConfigError",
    "ContractError",
    "CudaError",
    "DecodeReservation",
    "DecodeStep",
    "DestinationReservation",
    "Error",
    "InvariantError",
    "Manager",
    "PrefillCost",
    "PrefixPins",
    "Request",
    "TransferError",
    "cuda_compiled",
    "cuda_device_count",
    "has_zmq",
    "model_layers",
    "page_pattern",
] + (["ZmqEventPublisher"] if has_zmq else [])
