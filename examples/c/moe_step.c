/* One training step of an FP8 MoE expert layer from C: a qgemm plan's
 * forward (the weights quantized first) and backward, each one call, on
 * buffers allocated with the CUDA driver API. The output is checked against
 * a double-precision reference of the same bf16 operands.
 *
 *   moe_step            E=8 experts, H=1024, I=512, T=256 tokens, top-2
 *
 * Prints the plan's sizes first (no GPU needed), then runs the step. Exit
 * status: 0 when the step ran and the output is within the FP8 error budget
 * (relative error under 0.1), 1 on an error, 2 when no usable CUDA device
 * is found. */
#include <qgemm/qgemm.h>

#include <cuda.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { E = 8, H = 1024, I = 512, T = 256, K = 2, ALIGN = 16 };

#define QGEMM_OK_OR_FAIL(call)                                                 \
  do {                                                                         \
    if ((call) != QGEMM_OK) {                                                  \
      fprintf(stderr, "%s: %s\n", #call, qgemm_last_error_message());          \
      return 1;                                                                \
    }                                                                          \
  } while (0)
#define CU_OR_FAIL(call)                                                       \
  do {                                                                         \
    CUresult r_ = (call);                                                      \
    if (r_ != CUDA_SUCCESS) {                                                  \
      fprintf(stderr, "%s: CUDA error %d\n", #call, (int)r_);                  \
      return 1;                                                                \
    }                                                                          \
  } while (0)

static uint16_t to_bf16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static double normal(void) { /* Box-Muller on rand() */
  double u = (rand() + 1.0) / (RAND_MAX + 2.0), v = rand() / (RAND_MAX + 1.0);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
static void fill_bf16(uint16_t *p, size_t n, double scale) {
  for (size_t i = 0; i < n; ++i)
    p[i] = to_bf16((float)(normal() * scale));
}

/* A device buffer of n bytes, optionally filled from host memory. */
static int dev(CUdeviceptr *d, size_t n, const void *host) {
  if (cuMemAlloc(d, n ? n : 1) != CUDA_SUCCESS)
    return 1;
  return host && cuMemcpyHtoD(*d, host, n) != CUDA_SUCCESS;
}

int main(void) {
  qgemm_runtime *rt;
  qgemm_moe_plan *plan;
  QGEMM_OK_OR_FAIL(qgemm_runtime_create(NULL, &rt));
  qgemm_moe_plan_desc desc = QGEMM_MOE_PLAN_DESC_INIT;
  desc.experts = E;
  desc.hidden = H;
  desc.inter = I;
  desc.topk = K;
  desc.alignment = ALIGN;
  QGEMM_OK_OR_FAIL(qgemm_moe_plan_create(rt, &desc, &plan));
  qgemm_moe_sizes s = {sizeof s};
  QGEMM_OK_OR_FAIL(qgemm_moe_plan_sizes(plan, T, &s));
  printf("plan: E=%d H=%d I=%d top-%d, %d tokens -> %lld permuted rows, "
         "workspace %lld B forward, %lld B backward\n",
         E, H, I, K, T, (long long)s.rows, (long long)s.forward_workspace,
         (long long)s.backward_workspace);

  CUdevice device;
  CUcontext ctx;
  CUresult r = cuInit(0);
  int count = 0;
  if (r == CUDA_SUCCESS)
    r = cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    printf("no usable CUDA device (CUresult %d, %d devices): the step is "
           "not run\n",
           (int)r, count);
    return 2;
  }
  CU_OR_FAIL(cuDeviceGet(&device, 0));
  CU_OR_FAIL(cuDevicePrimaryCtxRetain(&ctx, device));
  CU_OR_FAIL(cuCtxSetCurrent(ctx));

  /* Host inputs: tokens N(0,1), weights N(0, 1/fan_in), distinct experts
   * per token, softmax probabilities, an N(0,1) output gradient. */
  srand(1);
  uint16_t *x = malloc(sizeof(uint16_t) * T * H);
  uint16_t *w13 = malloc(sizeof(uint16_t) * E * 2 * I * H);
  uint16_t *w2 = malloc(sizeof(uint16_t) * E * H * I);
  uint16_t *dout = malloc(sizeof(uint16_t) * T * H);
  int32_t *ids = malloc(sizeof(int32_t) * T * K);
  float *probs = malloc(sizeof(float) * T * K);
  fill_bf16(x, (size_t)T * H, 1.0);
  fill_bf16(w13, (size_t)E * 2 * I * H, 1.0 / sqrt(H));
  fill_bf16(w2, (size_t)E * H * I, 1.0 / sqrt(I));
  fill_bf16(dout, (size_t)T * H, 1.0);
  for (int t = 0; t < T; ++t) {
    double z[K], sum = 0;
    for (int j = 0; j < K; ++j) {
      int e, dup;
      do {
        e = rand() % E;
        dup = 0;
        for (int q = 0; q < j; ++q)
          dup |= ids[t * K + q] == e;
      } while (dup);
      ids[t * K + j] = e;
      z[j] = exp(normal());
      sum += z[j];
    }
    for (int j = 0; j < K; ++j)
      probs[t * K + j] = (float)(z[j] / sum);
  }

  /* Device buffers: inputs, the FP8 weights (both forms), the forward's
   * outputs and saved tensors, the gradients, the error word, workspace. */
  const size_t R = (size_t)s.rows;
  CUdeviceptr dx, dw13, dw2, dids, dprobs, ddout;
  CUdeviceptr w13q, w13s, w13qt, w13st, w2q, w2s, w2qt, w2st;
  CUdeviceptr out, offs, rowg, rowm, h, acol, acols, o, rerr, err, ws;
  CUdeviceptr gx, gprobs, gw13, gw2, dhr, dhrs, dhc, dhcs;
  const size_t sc13 = (size_t)s.weight_scales13 * 4,
               sc2 = (size_t)s.weight_scales2 * 4;
  size_t wsBytes = (size_t)(s.forward_workspace > s.backward_workspace
                                ? s.forward_workspace
                                : s.backward_workspace);
  if (dev(&dx, 2 * T * H, x) || dev(&dw13, 2 * (size_t)E * 2 * I * H, w13) ||
      dev(&dw2, 2 * (size_t)E * H * I, w2) || dev(&dids, 4 * T * K, ids) ||
      dev(&dprobs, 4 * T * K, probs) || dev(&ddout, 2 * T * H, dout) ||
      dev(&w13q, (size_t)E * 2 * I * H, NULL) || dev(&w13s, sc13, NULL) ||
      dev(&w13qt, (size_t)E * 2 * I * H, NULL) || dev(&w13st, sc13, NULL) ||
      dev(&w2q, (size_t)E * H * I, NULL) || dev(&w2s, sc2, NULL) ||
      dev(&w2qt, (size_t)E * H * I, NULL) || dev(&w2st, sc2, NULL) ||
      dev(&out, 2 * T * H, NULL) || dev(&offs, 4 * E, NULL) ||
      dev(&rowg, 4 * R, NULL) || dev(&rowm, 4 * T * K, NULL) ||
      dev(&h, 2 * R * 2 * I, NULL) || dev(&acol, R * I, NULL) ||
      dev(&acols, 4 * (size_t)s.a_col_scales, NULL) ||
      dev(&o, 2 * R * H, NULL) || dev(&rerr, 4, NULL) || dev(&err, 4, NULL) ||
      dev(&ws, wsBytes, NULL) || dev(&gx, 2 * T * H, NULL) ||
      dev(&gprobs, 4 * T * K, NULL) ||
      dev(&gw13, 2 * (size_t)E * 2 * I * H, NULL) ||
      dev(&gw2, 2 * (size_t)E * H * I, NULL) ||
      dev(&dhr, R * 2 * I, NULL) ||
      dev(&dhrs, 4 * (size_t)s.dh_row_scales, NULL) ||
      dev(&dhc, R * 2 * I, NULL) ||
      dev(&dhcs, 4 * (size_t)s.dh_col_scales, NULL)) {
    fprintf(stderr, "device allocation failed\n");
    return 1;
  }
  CU_OR_FAIL(cuMemsetD32(err, 0, 1));

  qgemm_moe_forward_args f = {sizeof f};
  f.x = dx, f.expert_ids = dids, f.probs = dprobs;
  f.w13 = dw13, f.w2 = dw2; /* quantized inside the forward */
  f.w13q = w13q, f.w13s = w13s, f.w2q = w2q, f.w2s = w2s;
  f.w13q_t = w13qt, f.w13s_t = w13st, f.w2q_t = w2qt, f.w2s_t = w2st;
  f.out = out, f.offsets = offs, f.row_group = rowg, f.row_map = rowm;
  f.h = h, f.a_col = acol, f.a_col_scales = acols, f.o = o;
  f.routing_error = rerr, f.error_flag = err;
  f.workspace = ws, f.workspace_bytes = s.forward_workspace, f.tokens = T;
  QGEMM_OK_OR_FAIL(qgemm_moe_plan_forward(plan, &f, NULL));

  qgemm_moe_backward_args b = {sizeof b};
  b.grad_out = ddout, b.x = dx, b.expert_ids = dids, b.probs = dprobs;
  b.offsets = offs, b.row_group = rowg, b.row_map = rowm, b.h = h;
  b.a_col = acol, b.a_col_scales = acols, b.o = o;
  b.w13q_t = w13qt, b.w13s_t = w13st, b.w2q_t = w2qt, b.w2s_t = w2st;
  b.grad_x = gx, b.grad_probs = gprobs, b.grad_w13 = gw13, b.grad_w2 = gw2;
  b.dh_rows = dhr, b.dh_row_scales = dhrs;
  b.dh_cols = dhc, b.dh_col_scales = dhcs; /* between the parts */
  b.error_flag = err, b.workspace = ws;
  b.workspace_bytes = s.backward_workspace, b.tokens = T;
  QGEMM_OK_OR_FAIL(qgemm_moe_plan_backward(plan, &b, NULL));
  CU_OR_FAIL(cuCtxSynchronize());

  int32_t word = 0, routing = 0;
  CU_OR_FAIL(cuMemcpyDtoH(&word, err, 4));
  CU_OR_FAIL(cuMemcpyDtoH(&routing, rerr, 4));
  if (word || routing) {
    fprintf(stderr, "error word %d, routing error %d\n", word, routing);
    return 1;
  }

  /* The reference: out[t] = sum_j p[t,j] w2[e] (silu(gate) * up), in
   * double from the same bf16 operands. */
  uint16_t *got = malloc(sizeof(uint16_t) * T * H);
  uint16_t *gxh = malloc(sizeof(uint16_t) * T * H);
  CU_OR_FAIL(cuMemcpyDtoH(got, out, 2 * T * H));
  CU_OR_FAIL(cuMemcpyDtoH(gxh, gx, 2 * T * H));
  double *a = malloc(sizeof(double) * I), num = 0, den = 0, gnorm = 0;
  for (int t = 0; t < T; ++t) {
    double *ref = calloc(H, sizeof(double));
    for (int j = 0; j < K; ++j) {
      int e = ids[t * K + j];
      for (int i = 0; i < I; ++i) {
        double g = 0, u = 0;
        const uint16_t *wg = w13 + ((size_t)e * 2 * I + i) * H;
        const uint16_t *wu = w13 + ((size_t)e * 2 * I + I + i) * H;
        for (int c = 0; c < H; ++c) {
          double xv = from_bf16(x[t * H + c]);
          g += xv * from_bf16(wg[c]);
          u += xv * from_bf16(wu[c]);
        }
        a[i] = g / (1.0 + exp(-g)) * u;
      }
      for (int c = 0; c < H; ++c) {
        const uint16_t *wd = w2 + ((size_t)e * H + c) * I;
        double acc = 0;
        for (int i = 0; i < I; ++i)
          acc += a[i] * from_bf16(wd[i]);
        ref[c] += probs[t * K + j] * acc;
      }
    }
    for (int c = 0; c < H; ++c) {
      double d = from_bf16(got[t * H + c]) - ref[c];
      num += d * d;
      den += ref[c] * ref[c];
      double gv = from_bf16(gxh[t * H + c]);
      gnorm += isnan(gv) ? NAN : gv * gv;
    }
    free(ref);
  }
  double rel = sqrt(num / den);
  printf("forward: relative error %.4f against float64 (FP8 budget 0.1); "
         "backward: |dx| = %.3f\n",
         rel, sqrt(gnorm));
  qgemm_moe_plan_destroy(plan);
  qgemm_runtime_destroy(rt);
  cuDevicePrimaryCtxRelease(device);
  return rel < 0.1 && rel > 0.0 && isfinite(gnorm) ? 0 : 1;
}
