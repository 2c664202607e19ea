/* _pedelec_windows: the Windows calls the host's trust checks make, built into the
 * bundle's executable (launcher.c registers it before the interpreter starts).
 *
 * native_host/windows_acl.py and native_host/core/peer/windows.py make these calls with
 * ctypes wherever the host runs on an interpreter of its own (a pipx or uv install). In
 * the bundle they come from here instead: importing ctypes loads _ctypes.pyd, libffi and
 * the ole32 and oleaut32 it links, about 55 ms of every start under Wine (a few on
 * Windows), and the host needs ctypes for nothing else. Each function returns the raw
 * bytes the Python side already parses; every decision stays there.
 *
 * The interpreter's C API is declared here, not taken from Python.h (the embeddable
 * CPython ships no headers): only the stable ABI (PEP 384), as a module built for it
 * with an older CPython would see it. */
#include <windows.h>
#include <aclapi.h>
#include <iphlpapi.h>
#include <stdint.h>

/* --- the part of the stable ABI used here ------------------------------------------ */
typedef intptr_t Py_ssize_t;
typedef struct _object PyObject;
typedef PyObject *(*PyCFunction)(PyObject *, PyObject *);

struct PyObjectHead {
    Py_ssize_t ob_refcnt;
    void *ob_type;
};
typedef struct {
    const char *ml_name;
    PyCFunction ml_meth;
    int ml_flags;
    const char *ml_doc;
} PyMethodDef;
typedef struct {
    struct PyObjectHead ob_base;
    PyObject *(*m_init)(void);
    Py_ssize_t m_index;
    PyObject *m_copy;
} PyModuleDef_Base;
typedef struct {
    PyModuleDef_Base m_base;
    const char *m_name;
    const char *m_doc;
    Py_ssize_t m_size;
    PyMethodDef *m_methods;
    void *m_slots, *m_traverse, *m_clear, *m_free;
} PyModuleDef;

#define METH_VARARGS 0x0001
#define PYTHON_ABI_VERSION 3

/* Found in the interpreter's DLL by windows_calls_bind, as launcher.c finds Py_Main: the
 * executable links no Python DLL, so a broken bundle says so instead of failing to load. */
static struct {
    PyObject *(*PyModule_Create2)(PyModuleDef *, int);
    int (*PyArg_ParseTuple)(PyObject *, const char *, ...);
    PyObject *(*PyBytes_FromStringAndSize)(const char *, Py_ssize_t);
    PyObject *(*Py_BuildValue)(const char *, ...);
    PyObject *(*PyErr_SetFromWindowsErr)(int);
    wchar_t *(*PyUnicode_AsWideCharString)(PyObject *, Py_ssize_t *);
    void (*PyMem_Free)(void *);
} py;


static int resolve(HMODULE python, void **slot, const char *name)
{
    *slot = (void *)(intptr_t)GetProcAddress(python, name);
    return *slot != NULL;
}

/* Resolve the C API this module uses; 0 (and the name) when the DLL lacks one. */
int windows_calls_bind(HMODULE python, const char **missing)
{
    struct { void **slot; const char *name; } wanted[] = {
        {(void **)&py.PyModule_Create2, "PyModule_Create2"},
        {(void **)&py.PyArg_ParseTuple, "PyArg_ParseTuple"},
        {(void **)&py.PyBytes_FromStringAndSize, "PyBytes_FromStringAndSize"},
        {(void **)&py.Py_BuildValue, "Py_BuildValue"},
        {(void **)&py.PyErr_SetFromWindowsErr, "PyErr_SetFromWindowsErr"},
        {(void **)&py.PyUnicode_AsWideCharString, "PyUnicode_AsWideCharString"},
        {(void **)&py.PyMem_Free, "PyMem_Free"},
    };
    size_t index;
    for (index = 0; index < sizeof wanted / sizeof wanted[0]; index++) {
        if (!resolve(python, wanted[index].slot, wanted[index].name)) {
            *missing = wanted[index].name;
            return 0;
        }
    }
    return 1;
}

/* --- the calls ---------------------------------------------------------------------- */
/* Objects are made by functions taking explicit sizes (no "#" format, whose length type
 * changed across versions); Py_BuildValue("") is None, and "N" hands over a reference. */
static PyObject *security_result(PSID owner, PACL dacl, PSECURITY_DESCRIPTOR descriptor)
{
    PyObject *sid, *acl;
    if (owner == NULL) {
        LocalFree(descriptor);
        return py.PyErr_SetFromWindowsErr(ERROR_INVALID_OWNER);
    }
    sid = py.PyBytes_FromStringAndSize((const char *)owner, (Py_ssize_t)GetLengthSid(owner));
    acl = dacl == NULL ? py.Py_BuildValue("")
                       : py.PyBytes_FromStringAndSize((const char *)dacl, (Py_ssize_t)dacl->AclSize);
    LocalFree(descriptor);
    if (sid == NULL || acl == NULL)
        return NULL; /* out of memory: the exception is set (a leaked half is moot) */
    return py.Py_BuildValue("(NN)", sid, acl);
}

/* file_security(path) -> (owner SID, DACL or None); file_security(None, handle) of an
 * open handle. OSError (winerror) when Windows refuses. */
static PyObject *file_security(PyObject *self, PyObject *args)
{
    PyObject *path;
    long long handle = -1;
    PSID owner = NULL;
    PACL dacl = NULL;
    PSECURITY_DESCRIPTOR descriptor = NULL;
    SECURITY_INFORMATION wanted = OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION;
    DWORD code;
    (void)self;
    if (!py.PyArg_ParseTuple(args, "O|L", &path, &handle))
        return NULL;
    if (handle != -1) {
        code = GetSecurityInfo((HANDLE)(intptr_t)handle, SE_FILE_OBJECT, wanted, &owner, NULL,
                               &dacl, NULL, &descriptor);
    } else {
        wchar_t *name = py.PyUnicode_AsWideCharString(path, NULL);
        if (name == NULL)
            return NULL;
        code = GetNamedSecurityInfoW(name, SE_FILE_OBJECT, wanted, &owner, NULL, &dacl, NULL,
                                     &descriptor);
        py.PyMem_Free(name);
    }
    if (code != ERROR_SUCCESS)
        return py.PyErr_SetFromWindowsErr((int)code);
    return security_result(owner, dacl, descriptor);
}

/* process_sid(pid) -> the user SID of process `pid` (-1: this one), or None when it
 * cannot be opened or queried. */
static PyObject *process_sid(PyObject *self, PyObject *args)
{
    long long pid;
    HANDLE process, token = NULL;
    DWORD size = 0;
    BYTE buffer[512];
    PyObject *result = NULL;
    (void)self;
    if (!py.PyArg_ParseTuple(args, "L", &pid))
        return NULL;
    process = pid == -1 ? GetCurrentProcess()
                        : OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (process == NULL)
        return py.Py_BuildValue("");
    if (OpenProcessToken(process, TOKEN_QUERY, &token) &&
        GetTokenInformation(token, TokenUser, buffer, sizeof buffer, &size)) {
        PSID sid = ((TOKEN_USER *)buffer)->User.Sid;
        result = py.PyBytes_FromStringAndSize((const char *)sid, (Py_ssize_t)GetLengthSid(sid));
    } else {
        result = py.Py_BuildValue("");
    }
    if (token != NULL)
        CloseHandle(token);
    if (pid != -1)
        CloseHandle(process);
    return result;
}

/* tcp_table(family, first_size) -> GetExtendedTcpTable(TCP_TABLE_OWNER_PID_ALL) of one
 * family, raw; the buffer grows to the size Windows asks for. OSError otherwise. */
static PyObject *tcp_table(PyObject *self, PyObject *args)
{
    int family;
    unsigned long size;
    int attempt;
    (void)self;
    if (!py.PyArg_ParseTuple(args, "ik", &family, &size))
        return NULL;
    for (attempt = 0; attempt < 4; attempt++) {
        void *buffer = HeapAlloc(GetProcessHeap(), 0, size);
        DWORD asked = size;
        DWORD code;
        PyObject *result;
        if (buffer == NULL)
            return py.PyErr_SetFromWindowsErr(ERROR_OUTOFMEMORY);
        code = GetExtendedTcpTable(buffer, &asked, FALSE, (ULONG)family,
                                   TCP_TABLE_OWNER_PID_ALL, 0);
        if (code == NO_ERROR) {
            result = py.PyBytes_FromStringAndSize(buffer, (Py_ssize_t)asked);
            HeapFree(GetProcessHeap(), 0, buffer);
            return result;
        }
        HeapFree(GetProcessHeap(), 0, buffer);
        /* ERROR_INSUFFICIENT_BUFFER: the table grew; ERROR_OUTOFMEMORY: Wine 8 now and then. */
        if (code != ERROR_INSUFFICIENT_BUFFER && code != ERROR_OUTOFMEMORY)
            return py.PyErr_SetFromWindowsErr((int)code);
        size = (asked > size ? asked : size) + 4096;
    }
    return py.PyErr_SetFromWindowsErr(ERROR_INSUFFICIENT_BUFFER);
}

/* set_stdout_handle(handle) -> whether SetStdHandle(STD_OUTPUT_HANDLE, handle) worked:
 * what this process's children inherit as stdout is then no longer the frame stream. */
static PyObject *set_stdout_handle(PyObject *self, PyObject *args)
{
    long long handle;
    (void)self;
    if (!py.PyArg_ParseTuple(args, "L", &handle))
        return NULL;
    return py.Py_BuildValue("i", SetStdHandle(STD_OUTPUT_HANDLE, (HANDLE)(intptr_t)handle) ? 1 : 0);
}

static PyMethodDef methods[] = {
    {"file_security", file_security, METH_VARARGS, "(owner SID, DACL or None) of a file"},
    {"process_sid", process_sid, METH_VARARGS, "the user SID of a process, or None"},
    {"tcp_table", tcp_table, METH_VARARGS, "GetExtendedTcpTable(TCP_TABLE_OWNER_PID_ALL)"},
    {"set_stdout_handle", set_stdout_handle, METH_VARARGS, "SetStdHandle(STD_OUTPUT_HANDLE)"},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef module = {
    {{1, NULL}, NULL, 0, NULL},
    "_pedelec_windows",
    "The Windows calls of the host's trust checks (packaging/windows/windows_calls.c).",
    -1,
    methods,
    NULL, NULL, NULL, NULL,
};

PyObject *PyInit__pedelec_windows(void)
{
    return py.PyModule_Create2(&module, PYTHON_ABI_VERSION);
}
