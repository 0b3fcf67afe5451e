# CMake toolchain: cross-build octo for 64-bit ARM Linux (AArch64) with the
# Debian cross compiler, and run its binaries under qemu-user. Used by
# scripts/test-arm.sh:
#
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#
# Needs the Debian packages gcc-aarch64-linux-gnu and qemu-user. ctest runs
# every test through CMAKE_CROSSCOMPILING_EMULATOR; qemu-aarch64 reads
# QEMU_CPU from the environment (e.g. "max" has the dot-product extension,
# "cortex-a53" has not). -L points qemu at the target's libc and loader.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(OCTO_CROSS_PREFIX aarch64-linux-gnu CACHE STRING "cross tool prefix (<prefix>-gcc)")
set(OCTO_CROSS_SYSROOT /usr/${OCTO_CROSS_PREFIX} CACHE PATH "target libraries, for qemu -L")
set(CMAKE_C_COMPILER ${OCTO_CROSS_PREFIX}-gcc)
set(CMAKE_CROSSCOMPILING_EMULATOR "qemu-aarch64;-L;${OCTO_CROSS_SYSROOT}")

# Debian 12's aarch64-linux-gnu-gcc 12.2 crashes ("internal compiler error: in
# vect_transform_reduction") vectorizing a max/min reduction over converted
# values, e.g. `m = fmax(m, fabs((double)xf[i]))`, which the tests use. Calling
# the libm functions instead of the builtins sidesteps it; nothing in the
# library needs them to be fast (this is a test build; a call costs only time).
set(CMAKE_C_FLAGS_INIT "-fno-builtin-fmax -fno-builtin-fmin -fno-builtin-fmaxf -fno-builtin-fminf")

# Headers and libraries from the target tree only; programs from the host.
set(CMAKE_FIND_ROOT_PATH ${OCTO_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
