// The calling convention between the toolkit's public libraries, the bridge and the Python core.
//
// A public function (generated from toolkit/npuemu_toolkit/surface.py) packs its C arguments into npuemu_value
// slots and calls npuemu_forward() with its number in the table; the bridge (bridge.cpp, no Python
// in it) starts the embedded interpreter on the first call and hands the call to the core
// (core.cpp), which converts each slot by its kind, calls the Python function and writes the
// outputs back. The kinds say how a slot becomes a Python value and back.
#ifndef NPUEMU_TOOLKIT_FORWARD_H_
#define NPUEMU_TOOLKIT_FORWARD_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef union npuemu_value {
  int64_t i;      // signed integers, enums, bool (0/1), statuses
  uint64_t u;     // unsigned integers, sizes, counts
  double d;       // float and double
  const void *p;  // pointers: addresses, handles, arrays, strings, out-parameters, function pointers
} npuemu_value;

enum npuemu_kind {
  NK_NONE,
  NK_INT,            // -> int
  NK_UINT,           // -> int
  NK_BOOL,           // -> bool
  NK_DOUBLE,         // -> float
  NK_PTR,            // an address or a handle -> int, null -> None
  NK_FUNCTION,       // a function pointer (a callback) -> int, null -> None; refused unless it is executable memory
  NK_OBJECT,         // an aclnn object's handle -> the live object if it is one of class aux, else the int
  NK_STR,            // const char * -> str, null -> None
  NK_I64_ARRAY,      // const int64_t * + count (aux: the count's slot) -> list of int, null -> None
  NK_F32_ARRAY,      // const float * + count -> list of float
  NK_BOOL_ARRAY,     // const bool * + count -> list of bool
  NK_PTR_ARRAY,      // const T *const * + count -> list of int (handles)
  NK_COUNT,          // the count of an input array: not passed on
  NK_OUT_I32,        // out-parameters, written from the Python call's outputs on success
  NK_OUT_U32,
  NK_OUT_I64,
  NK_OUT_U64,
  NK_OUT_F32,
  NK_OUT_PTR,        // void ** and T **: an int, an object with a `handle`, or None (null)
  NK_OUT_I64_ARRAY,  // int64_t ** (allocated with new[], the caller delete[]s it); aux: its count's slot
  NK_OUT_COUNT,      // uint64_t * count of an output array
};

enum npuemu_return {
  NR_STATUS,      // aclError / aclnnStatus: the Python call's int, or the last item of its tuple
  NR_HANDLE,      // a pointer-returning create: the object's handle, null for None
  NR_U64,
  NR_F32,
  NR_U16,
  NR_STR_STATIC,  // const char *, valid for the life of the process
  NR_STR_THREAD,  // const char *, valid until the thread's next call (aclGetRecentErrMsg)
};

enum npuemu_layer {
  NL_RUNTIME,  // acl*, aclrt*: 100000 for a null out-parameter, 507000 for an internal error
  NL_ACLNN,    // aclnn framework and operators: 161001, 561000
};

typedef struct npuemu_param {
  uint8_t kind;  // npuemu_kind
  uint8_t aux;   // the slot of an array's count; the class of an NK_OBJECT (npuemu_boot.object_classes)
} npuemu_param;

typedef struct npuemu_signature {
  const char *name;           // the C name
  const char *module;         // the Python callable: module and attribute
  const char *attribute;
  uint8_t layer;              // npuemu_layer
  uint8_t returns;            // npuemu_return
  uint8_t param_count;
  const npuemu_param *params;
  uint8_t output_count;
  const uint8_t *outputs;     // slots of the out-parameters, in the order the Python call returns them
  const char *const *names;   // parameter names, for messages
  uint8_t site_frames;        // the program's frames the call's site keeps (1: the caller only)
} npuemu_signature;

// The bridge's entry point: function `number` of the table with its packed arguments; `caller` is the
// C caller's return address (the site that leak and fault reports name), `frame` the caller's stack
// pointer at the call (the public function's canonical frame address): below it, the thread's stack is
// the toolkit's until the call returns.
__attribute__((visibility("default"))) npuemu_value npuemu_forward(int number, const npuemu_value *args,
                                                                   const void *caller, const void *frame);

// The core's entry points, found by the bridge with dlsym once it has loaded the core.
typedef struct npuemu_boot {
  const char *executable;            // the interpreter whose environment (venv) npuemu is installed in
  const npuemu_signature *signatures;
  int signature_count;
  int embedded;                      // 1: the core starts the interpreter; 0: the host is Python itself
  const char *const *object_classes; // the aclnn classes NK_OBJECT's aux numbers (attributes of aclnn_api)
  int object_class_count;
} npuemu_boot;

// What npuemu_core_boot returns; for the last two, `error` says why.
enum npuemu_boot_result {
  NB_STARTED,
  NB_FAILED,   // for good: every call fails
  NB_STOPPED,  // a KeyboardInterrupt (or another stop) came during the start: the next call starts again
};

typedef int (*npuemu_core_boot_fn)(const npuemu_boot *boot, char *error, unsigned long error_size);
typedef npuemu_value (*npuemu_core_call_fn)(int number, const npuemu_value *args, const void *caller,
                                           const void *frame);
typedef void (*npuemu_core_exit_fn)(void);

#ifdef __cplusplus
}
#endif

#endif  // NPUEMU_TOOLKIT_FORWARD_H_
