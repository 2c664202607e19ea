/* pedelec-native-host.exe: the Windows bundle's own executable (packaging/windows/build.py).
 *
 * It is the bundle's python.exe with the host's entry point built in: it loads the
 * python3XY.dll beside it and runs
 *     <itself> -I -S -B -c "<ENTRY>" <its own arguments>
 * so the browser (or a person typing `pedelec-native-host doctor`) starts the host with
 * one process, no cmd.exe or batch file of its own, and no bootloader that unpacks
 * anything. The interpreter finds its paths in the python3XY._pth beside the DLL;
 * `native_host.cli.start_bundle` loads the sealed start image beside this file. The
 * Windows calls of the host's trust checks are built in (windows_calls.c).
 *
 * Built with MinGW-w64 (`-municode`, console subsystem: Chrome hides console hosts):
 *     x86_64-w64-mingw32-gcc -municode -O2 -s -DPYTHON_DLL=L\"python313.dll\" \
 *         launcher.c windows_calls.c -ladvapi32 -liphlpapi
 */
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#ifndef PYTHON_DLL
#error "build with -DPYTHON_DLL=L\"python3XY.dll\""
#endif

/* Exit status when the bundle's interpreter cannot be loaded (README, "Exit status"). */
#define EXIT_BROKEN_BUNDLE 3

typedef int(__cdecl *py_main_fn)(int, wchar_t **);
typedef int(__cdecl *append_inittab_fn)(const char *, void *(*)(void));

/* windows_calls.c: the module of the host's Windows calls, registered as a built-in. */
int windows_calls_bind(HMODULE python, const char **missing);
void *PyInit__pedelec_windows(void);

/* -I: isolated (no PYTHON* variables, no user site); -S: no site (the ._pth names the
 * paths); -B: write no .pyc (the bundle ships them; uninstall leaves no stray file). */
static const wchar_t *const OPTIONS[] = {
    L"-I", L"-S", L"-B", L"-c",
    L"import sys; from native_host.cli import start_bundle; sys.exit(start_bundle())",
};
#define OPTION_COUNT (sizeof OPTIONS / sizeof OPTIONS[0])

static int broken(const wchar_t *what, const wchar_t *path)
{
    DWORD code = GetLastError();
    fwprintf(stderr, L"pedelec-native-host: %ls %ls (Windows error %lu): reinstall it\n", what,
             path, (unsigned long)code);
    return EXIT_BROKEN_BUNDLE;
}

int wmain(int argc, wchar_t **argv)
{
    static wchar_t dll[32768];
    DWORD length = GetModuleFileNameW(NULL, dll, 32768);
    wchar_t *slash;
    HMODULE python;
    py_main_fn py_main;
    append_inittab_fn append_inittab;
    const char *missing = NULL;
    wchar_t **args;
    int count = 0;
    int index;

    if (length == 0 || length >= 32768)
        return broken(L"cannot find its own path", L"");
    slash = wcsrchr(dll, L'\\');
    if (slash == NULL || (size_t)(slash - dll) + 1 + wcslen(PYTHON_DLL) >= 32768)
        return broken(L"cannot name its interpreter beside", dll);
    wcscpy(slash + 1, PYTHON_DLL);
    /* The full path, and its own folder for the DLLs it needs (vcruntime140.dll): never
     * a python3XY.dll found on PATH or in the current directory. */
    python = LoadLibraryExW(dll, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
    if (python == NULL)
        return broken(L"cannot load", dll);
    py_main = (py_main_fn)(void (*)(void))GetProcAddress(python, "Py_Main");
    append_inittab = (append_inittab_fn)(void (*)(void))GetProcAddress(python,
                                                                         "PyImport_AppendInittab");
    if (py_main == NULL || append_inittab == NULL || !windows_calls_bind(python, &missing))
        return broken(L"finds not all of the C API it calls in", dll);
    if (append_inittab("_pedelec_windows", PyInit__pedelec_windows) != 0)
        return broken(L"cannot register its built-in module with", dll);

    args = calloc((size_t)argc + OPTION_COUNT + 1, sizeof *args);
    if (args == NULL)
        return broken(L"is out of memory starting", dll);
    args[count++] = argv[0];
    for (index = 0; index < (int)OPTION_COUNT; index++)
        args[count++] = (wchar_t *)OPTIONS[index];
    for (index = 1; index < argc; index++)
        args[count++] = argv[index];
    return py_main(count, args);
}
