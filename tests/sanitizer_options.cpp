// Tests allocate impossible sizes on purpose and expect a typed error, not a
// sanitizer abort. These hooks are read only by sanitized builds.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
extern "C" const char* __tsan_default_options() { return "allocator_may_return_null=1"; }
// libzmq (Debian's, not built with TSan) hands messages between its I/O
// threads through lock-free queues TSan cannot see: its accesses are not
// kvtier's races. kvtier's own threads stay checked.
extern "C" const char* __tsan_default_suppressions() { return "called_from_lib:libzmq.so.5\nrace:libzmq.so.5\n"; }
