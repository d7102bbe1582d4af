/* kernel_info: compile a qgemm spec through the C API and print what a host
 * program needs to know about each kernel; no GPU needed.
 *
 *   kernel_info SPEC.json [ROWS GROUPS SMS]
 *
 * Built against an installed qgemm (see CMakeLists.txt here, or
 *   cc kernel_info.c $(pkg-config --cflags --libs qgemm) -o kernel_info).
 * Besides printing, it checks what it prints (the PTX has the kernel's entry
 * point, a launch with missing pointers is refused before the driver is
 * touched, a broken spec names its JSON path) and exits 1 when a check
 * fails, so the install test can run it as is. */
#include <qgemm/qgemm.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                      \
  do {                                                        \
    if (!(cond)) {                                            \
      fprintf(stderr, "check failed: %s: ", #cond);           \
      fprintf(stderr, __VA_ARGS__);                           \
      fprintf(stderr, "\n");                                  \
      ++failures;                                             \
    }                                                         \
  } while (0)

static int report(qgemm_status st, const char *what) {
  fprintf(stderr, "%s: %s: %s\n", what, qgemm_status_name(st),
          qgemm_last_error_message());
  return 1;
}

static void print_scale(const char *name, qgemm_scale_info s) {
  printf("  %s.scale      [%d, %d] %s %s\n", name, s.block_rows, s.block_cols,
         qgemm_dtype_name((qgemm_dtype)s.dtype),
         qgemm_scale_layout_name((qgemm_scale_layout)s.layout));
}

static void print_kernel(const qgemm_kernel *k, int64_t rows, int64_t groups,
                         int64_t sms) {
  qgemm_gemm_info g = {sizeof g};
  qgemm_config_info c = {sizeof c};
  qgemm_launch_geometry geo = {sizeof geo};
  qgemm_status st;
  char entry[512];

  printf("kernel %s\n", qgemm_kernel_name(k));
  printf("  spec         %s\n", qgemm_kernel_spec_name(k));
  printf("  hash         %s\n", qgemm_kernel_hash(k));
  printf("  op           %s\n", qgemm_op_name(qgemm_kernel_op(k)));
  printf("  target       %s\n", qgemm_kernel_target(k));
  CHECK(strlen(qgemm_kernel_hash(k)) == 16, "hash %s", qgemm_kernel_hash(k));
  if (qgemm_kernel_op(k) != QGEMM_OP_GROUPED_GEMM)
    return;
  if ((st = qgemm_kernel_gemm_info(k, &g)) != QGEMM_OK) {
    ++failures;
    report(st, "qgemm_kernel_gemm_info");
    return;
  }
  printf("  grouping     %s (index %s, alignment %lld)\n",
         qgemm_grouping_name((qgemm_grouping)g.grouping),
         qgemm_group_index_name((qgemm_group_index)g.group_index),
         (long long)g.alignment);
  printf("  n, k         %lld, %lld\n", (long long)g.n, (long long)g.k);
  printf("  dtypes       a %s  b %s  d %s%s\n",
         qgemm_dtype_name((qgemm_dtype)g.a_dtype),
         qgemm_dtype_name((qgemm_dtype)g.b_dtype),
         qgemm_dtype_name((qgemm_dtype)g.d_dtype),
         g.accumulate ? "  (D = C + A.B)" : "");
  print_scale("a", g.a_scale);
  print_scale("b", g.b_scale);
  CHECK(g.n > 0 && g.k > 0, "n %lld k %lld", (long long)g.n, (long long)g.k);

  if ((st = qgemm_kernel_config(k, &c)) != QGEMM_OK) {
    ++failures;
    report(st, "qgemm_kernel_config");
    return;
  }
  printf("  config       %s tile %dx%dx%d stages %d threads %d cluster %d "
         "smem %lld B\n",
         qgemm_family_name((qgemm_family)c.family), c.block_m, c.block_n,
         c.block_k, c.stages, c.threads, c.cluster, (long long)c.shared_bytes);

  if ((st = qgemm_kernel_launch_geometry(k, rows, groups, sms, &geo)) !=
      QGEMM_OK) {
    ++failures;
    report(st, "qgemm_kernel_launch_geometry");
    return;
  }
  printf("  launch       rows %lld groups %lld on %lld SMs: grid (%lld, %lld, "
         "%lld) block %d cluster %d\n",
         (long long)rows, (long long)groups, (long long)sms,
         (long long)geo.grid[0], (long long)geo.grid[1],
         (long long)geo.grid[2], geo.block[0], geo.cluster);
  CHECK(geo.grid[0] >= 1 && geo.block[0] == c.threads, "grid %lld block %d",
        (long long)geo.grid[0], geo.block[0]);

  snprintf(entry, sizeof entry, ".entry %s(", qgemm_kernel_name(k));
  printf("  ptx          %zu bytes\n", strlen(qgemm_kernel_ptx(k)));
  CHECK(strstr(qgemm_kernel_ptx(k), entry) != NULL, "PTX lacks '%s'", entry);
}

/* A launch with no device pointers is refused by the argument checks, which
 * run before the CUDA driver is opened: the same answer with or without a
 * GPU. */
static void check_refused_launch(qgemm_runtime *rt, const qgemm_kernel *k) {
  qgemm_gemm_args args = QGEMM_GEMM_ARGS_INIT;
  qgemm_status st;
  args.rows = 128;
  st = qgemm_launch_gemm(rt, k, &args, NULL);
  printf("launch with null pointers: %s: %s\n", qgemm_status_name(st),
         qgemm_last_error_message());
  CHECK(st == QGEMM_ERROR_USER, "got %s", qgemm_status_name(st));
  CHECK(strstr(qgemm_last_error_message(), "a is null") != NULL, "message %s",
        qgemm_last_error_message());
}

/* Spec errors carry the source name and the JSON path. */
static void check_spec_error(void) {
  qgemm_spec *bad = NULL;
  qgemm_status st = qgemm_spec_parse(
      "{\"qgemm\": 1, \"name\": \"x\", \"op\": \"grouped_gemm\", "
      "\"shape\": {\"n\": 256, \"k\": 256}, "
      "\"a\": {\"scale\": {\"layout\": \"COMPACTT\"}}}",
      "inline.json", &bad);
  printf("bad spec: %s: %s\n", qgemm_status_name(st),
         qgemm_last_error_message());
  CHECK(st == QGEMM_ERROR_SPEC && bad == NULL, "got %s",
        qgemm_status_name(st));
  CHECK(strstr(qgemm_last_error_message(), "inline.json: a.scale.layout") !=
            NULL,
        "message %s", qgemm_last_error_message());
}

int main(int argc, char **argv) {
  qgemm_runtime *rt = NULL;
  qgemm_spec *spec = NULL;
  qgemm_status st;
  size_t i;
  int64_t rows = argc > 2 ? atoll(argv[2]) : 4096;
  int64_t groups = argc > 3 ? atoll(argv[3]) : 8;
  int64_t sms = argc > 4 ? atoll(argv[4]) : 132;

  if (argc < 2) {
    fprintf(stderr, "usage: %s SPEC.json [ROWS GROUPS SMS]\n", argv[0]);
    return 2;
  }
  /* A header newer than the library, or of another major version, would
   * read fields the library does not have. */
  if (qgemm_api_version() / 1000 != QGEMM_API_VERSION / 1000 ||
      qgemm_api_version() < QGEMM_API_VERSION) {
    fprintf(stderr, "libqgemm has C API %d, this program needs %d\n",
            qgemm_api_version(), QGEMM_API_VERSION);
    return 1;
  }
  printf("qgemm C API %d (%s)\n", qgemm_api_version(), qgemm_version_string());

  if ((st = qgemm_runtime_create(NULL, &rt)) != QGEMM_OK)
    return report(st, "qgemm_runtime_create");
  if ((st = qgemm_spec_parse_file(argv[1], &spec)) != QGEMM_OK)
    return report(st, argv[1]);
  printf("%s: %zu kernel(s)\n", argv[1], qgemm_spec_count(spec));
  for (i = 0; i < qgemm_spec_count(spec); ++i) {
    qgemm_kernel *k = NULL;
    st = qgemm_compile(rt, spec, i, &k);
    /* Without a GPU only the compile can fail; with one, a load error
     * still hands out the kernel. */
    if (st != QGEMM_OK && st != QGEMM_ERROR_NO_DEVICE) {
      ++failures;
      report(st, qgemm_spec_name(spec, i));
    }
    if (!k)
      continue;
    print_kernel(k, rows, groups, sms);
    if (i == 0 && qgemm_kernel_op(k) == QGEMM_OP_GROUPED_GEMM)
      check_refused_launch(rt, k);
    qgemm_kernel_destroy(k);
  }
  check_spec_error();
  qgemm_spec_destroy(spec);
  qgemm_runtime_destroy(rt);
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
