// deconvjit.Error and one subclass per Error::Kind. The classes that describe bad input also derive from
// the built-in exception a Python user would catch for it (ValueError, OSError), so generic code works.
#include <exception>

#include "bindings.hpp"

namespace deconvjit::python {
namespace {

struct KindClass {
  Error::Kind kind;
  const char* name;
  PyObject* extra_base;  // a built-in base besides deconvjit.Error, or null
  const char* doc;
};

// Created once at import and never freed: the translator may run until the interpreter shuts down.
PyObject* g_classes[6] = {};

int index_of(Error::Kind k) { return static_cast<int>(k); }

PyObject* new_class(const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("deconvjit.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!cls) throw py::error_already_set();
  return cls;
}

}  // namespace

void register_errors(py::module_& m) {
  PyObject* base = new_class("Error", PyExc_Exception, "Every error deconvjit reports.");
  m.attr("Error") = py::reinterpret_borrow<py::object>(base);
  const KindClass kinds[] = {
      {Error::Kind::InvalidDescriptor, "InvalidDescriptorError", PyExc_ValueError,
       "The descriptor is malformed or describes an invalid problem."},
      {Error::Kind::Unsupported, "UnsupportedError", nullptr,
       "A valid problem no kernel handles yet (e.g. a dtype other than f32)."},
      {Error::Kind::IsaUnavailable, "IsaUnavailableError", nullptr,
       "The requested instruction set is not available on this CPU."},
      {Error::Kind::InvalidArgument, "InvalidArgumentError", PyExc_ValueError,
       "A wrong argument: array shape or dtype, hint, ISA name, weights packed for another kernel."},
      {Error::Kind::Io, "IoError", PyExc_OSError, "A file could not be read or written."},
      {Error::Kind::Internal, "InternalError", nullptr, "A bug in deconvjit."},
  };
  for (const KindClass& k : kinds) {
    py::tuple bases = k.extra_base ? py::make_tuple(py::handle(base), py::handle(k.extra_base))
                                   : py::make_tuple(py::handle(base));
    PyObject* cls = new_class(k.name, bases.ptr(), k.doc);
    g_classes[index_of(k.kind)] = cls;
    m.attr(k.name) = py::reinterpret_borrow<py::object>(cls);
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(g_classes[index_of(e.kind())], e.what());
    }
  });
}

void invalid_argument(const std::string& message) { throw Error(Error::Kind::InvalidArgument, message); }

}  // namespace deconvjit::python
