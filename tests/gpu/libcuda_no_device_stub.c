/* A stand-in for the NVIDIA driver's libcuda.so.1 on a machine without a
 * GPU, for `make gpu-bundle-check` (scripts/gpu_bundle_check.py): ONNX
 * Runtime's CUDA provider lists libcuda.so.1 among its needed libraries, so
 * without some libcuda.so.1 it cannot even be loaded, and the rehearsal
 * would only show a missing library. With this one the provider and the
 * CUDA runtime load as on a GPU host, and every driver call answers as a
 * driver that sees no GPU: CUDA_ERROR_NO_DEVICE (100). Never shipped in the
 * bundle. Built with: cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda.so.1 THIS */
#include <string.h>

typedef int CUresult;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_NO_DEVICE = 100 };
static const char kNoDevice[] = "no CUDA-capable device is detected (ortserve's driver stand-in)";

static CUresult NoDevice(void) { return CUDA_ERROR_NO_DEVICE; }

CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_ERROR_NO_DEVICE; }
CUresult cuDriverGetVersion(int* version) { *version = 13000; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int* count) { *count = 0; return CUDA_ERROR_NO_DEVICE; }
CUresult cuGetErrorString(CUresult error, const char** text) { (void)error; *text = kNoDevice; return CUDA_SUCCESS; }
CUresult cuGetErrorName(CUresult error, const char** text) {
  (void)error;
  *text = "CUDA_ERROR_NO_DEVICE";
  return CUDA_SUCCESS;
}

/* The CUDA runtime finds the driver's entry points through here. */
static void* EntryPoint(const char* symbol) {
  if (strcmp(symbol, "cuInit") == 0) return (void*)cuInit;
  if (strcmp(symbol, "cuDriverGetVersion") == 0) return (void*)cuDriverGetVersion;
  if (strcmp(symbol, "cuDeviceGetCount") == 0) return (void*)cuDeviceGetCount;
  if (strcmp(symbol, "cuGetErrorString") == 0) return (void*)cuGetErrorString;
  if (strcmp(symbol, "cuGetErrorName") == 0) return (void*)cuGetErrorName;
  return (void*)NoDevice;
}
CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int version, unsigned long long flags, int* status) {
  (void)version;
  (void)flags;
  *fn = EntryPoint(symbol);
  if (status) *status = 0;
  return CUDA_SUCCESS;
}
CUresult cuGetProcAddress(const char* symbol, void** fn, int version, unsigned long long flags) {
  return cuGetProcAddress_v2(symbol, fn, version, flags, 0);
}
