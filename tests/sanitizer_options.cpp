// Tests allocate impossible sizes on purpose and expect a typed error, not a
// sanitizer abort. These hooks are read only by sanitized builds.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
extern "C" const char* __tsan_default_options() { return "allocator_may_return_null=1"; }
