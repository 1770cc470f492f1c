/* The CUDA runtime wheel's headers (driver_types.h, vector_types.h, ...)
   include crt/host_defines.h, which comes with nvcc and is not in the wheels
   target/pyenv installs. These are its attribute macros as it defines them
   for GCC, or empty where they only mark device code; none changes the
   layout of a CUPTI activity record. Only records.c uses this file. */
#ifndef ASYS_STUB_HOST_DEFINES_H
#define ASYS_STUB_HOST_DEFINES_H
#define __device_builtin__
#define __device_builtin_texture_type__
#define __device_builtin_surface_type__
#define __cudart_builtin__
#define __host__
#define __device__
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __align__(n)
#define CUDARTAPI
#define CUDARTAPI_CDECL
#endif
