// Clang's thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), as
// macros that expand to nothing for other compilers. State marked GF_GUARDED_BY(m) may be read or
// written only while m is held, functions marked GF_REQUIRES(m) only be called so; a clang build
// with -Wthread-safety (scripts/test.sh, GPUFLOW_THREAD_SAFETY) checks every access.
#pragma once

#if defined(__clang__)
#define GF_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GF_THREAD_ANNOTATION(x)
#endif

#define GF_CAPABILITY(name) GF_THREAD_ANNOTATION(capability(name))
#define GF_SCOPED_CAPABILITY GF_THREAD_ANNOTATION(scoped_lockable)
#define GF_GUARDED_BY(x) GF_THREAD_ANNOTATION(guarded_by(x))
#define GF_PT_GUARDED_BY(x) GF_THREAD_ANNOTATION(pt_guarded_by(x))
#define GF_REQUIRES(...) GF_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define GF_ACQUIRE(...) GF_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define GF_RELEASE(...) GF_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define GF_TRY_ACQUIRE(...) GF_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define GF_EXCLUDES(...) GF_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define GF_ASSERT_CAPABILITY(x) GF_THREAD_ANNOTATION(assert_capability(x))
#define GF_NO_THREAD_SAFETY_ANALYSIS GF_THREAD_ANNOTATION(no_thread_safety_analysis)
