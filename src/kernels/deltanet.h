// Contracts of the gated DeltaNet kernels (OpsKernels::conv_step and
// OpsKernels::delta_step in kernels/ops.h; the token mixer that uses them is
// model/mixers/gated_deltanet.*).
//
// conv_step(taps, x, w, K, C, y): one token of a causal depthwise convolution
// over C channels with K taps. taps holds the previous K-1 inputs, [K-1][C],
// oldest first (zeros at a sequence start); w is tap-major [K][C] (tap K-1
// multiplies the current input x). y[c] = sum_{i<K-1} taps[i][c] * w[i][c] +
// x[c] * w[K-1][c], summed in ascending i, each product rounded before it is
// added (no FMA). Then the taps shift by one: the oldest row is dropped and x
// becomes the newest. K >= 1 (K = 1: no taps). y must not alias taps or x.
// Stepping token by token gives the same bits however a sequence is split
// into calls, which is what makes the recurrent state checkpointable.
//
// delta_step(M, q, k, v, decay, beta, S, u, o): one token of the gated delta
// rule for one head with an S x S state M (row i = key dim i, column j =
// value dim j):
//   M <- decay * M;  u = M^T k;  delta = beta * (v - u);
//   M <- M + k delta^T;  o = M^T q.
// Two passes over M per token. Every output element j is accumulated over i
// in ascending order, product rounded then added (no FMA), and the SIMD
// versions vectorise over j only, so every ISA gives the scalar bits. u is
// scratch of S floats (it holds delta on return); o gets S floats. q, k, v,
// u and o must not alias M or each other.
//
// kda_step(M, q, k, v, decay, beta, S, u, o): the same with a decay per key
// dimension (Kimi Delta Attention, bailingmoe3): row i of M is scaled by
// decay[i] instead of one scalar; same order and rounding otherwise.
#pragma once

#include "kernels/ops.h"
