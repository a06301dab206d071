// Work done without the GIL, for the kernels' bindings.
//
// CPython ends a thread that takes the GIL while the interpreter is finalised (a daemon thread still in
// a kernel when the program ends) with pthread_exit, which unwinds the thread's stack as an exception
// (abi::__forced_unwind). Taken back in a destructor (pybind11's gil_scoped_release), which is noexcept,
// that unwind terminates the process ("terminate called without an active exception"). So the GIL is
// taken back here in the normal flow, and the unwind goes on through the binding (pybind11's dispatcher
// lets it through) until the thread is gone, as for a daemon thread in Python code.
#pragma once
#include <Python.h>
#include <cxxabi.h>

#include <exception>

namespace npuemu {

// Runs work() without the GIL, then takes the GIL back; an exception of the work is raised after that.
template <class Work>
void without_gil(Work&& work) {
  std::exception_ptr error;
  PyThreadState* saved = PyEval_SaveThread();
  try {
    work();
  } catch (abi::__forced_unwind&) {
    throw;  // the thread is ending (pthread_exit, cancellation): it goes without the GIL
  } catch (...) {
    error = std::current_exception();
  }
  PyEval_RestoreThread(saved);
  if (error) std::rethrow_exception(error);
}

}  // namespace npuemu
