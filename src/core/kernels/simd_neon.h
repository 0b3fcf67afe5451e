/*
 * simd_neon — what the AArch64 kernel files share: how a function is compiled
 * for the dot-product extension (SDOT, ARMv8.2 "dotprod") while the rest of
 * the binary still runs on a CPU without it (kernels.c asks the system before
 * choosing), and the always-inline marker of the inner loops.
 *
 * GCC's arm_neon.h defines vdotq_s32 under arch=armv8.2-a+dotprod, so the
 * caller must name that arch; when the whole file is already built with
 * dotprod no attribute is needed (and naming a lower arch would then break
 * inlining). Clang before 16 only declares vdotq_s32 when the file targets
 * dotprod, so it gets inline asm (NEON_SDOT_ASM).
 */
#ifndef OCTO_CORE_KERNELS_SIMD_NEON_H
#define OCTO_CORE_KERNELS_SIMD_NEON_H

#if defined(__aarch64__)

#if defined(__ARM_FEATURE_DOTPROD)
#define NEON_DOTPROD
#elif defined(__clang__)
#define NEON_DOTPROD __attribute__((target("dotprod")))
#if __clang_major__ < 16
#define NEON_SDOT_ASM 1
#endif
#else
#define NEON_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))
#endif

/* The int8 matrix multiply (SMMLA, ARMv8.6 "i8mm"), on CPUs that also have
 * SDOT: the functions that use it are compiled for both. */
#if defined(__ARM_FEATURE_MATMUL_INT8) && defined(__ARM_FEATURE_DOTPROD)
#define NEON_I8MM
#elif defined(__clang__)
#define NEON_I8MM __attribute__((target("dotprod,i8mm")))
#else
#define NEON_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))
#endif

/* The BFloat16 extension (BFMMLA, BFDOT; ARMv8.6 "bf16"). */
#if defined(__ARM_FEATURE_BF16_VECTOR_ARITHMETIC)
#define NEON_BF16
#elif defined(__clang__)
#define NEON_BF16 __attribute__((target("bf16")))
#else
#define NEON_BF16 __attribute__((target("arch=armv8.2-a+bf16")))
#endif

#define NEON_INLINE static inline __attribute__((always_inline))

#endif

#endif
