#!/bin/sh
# t_quant_generic.sh - tests/t_quant again with the portable kernel of the block-scaled what-if
# (AMPDIAG_QUANT_IMPL=generic), so that both kernels are checked on a CPU that has AVX-512F.
exec env AMPDIAG_QUANT_IMPL=generic ./tests/t_quant
