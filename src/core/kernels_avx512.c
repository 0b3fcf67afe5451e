/* placeholder until the AVX-512 kernels land: every type uses the scalar kernel */
#include "kernels.h"
void kernels_fill_avx512(kernel_entry table[], int n_types, bool int8_dot) { (void)table; (void)n_types; (void)int8_dot; }
