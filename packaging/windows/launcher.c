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
#include <aclapi.h>
#include <sddl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#ifndef PYTHON_DLL
#error "build with -DPYTHON_DLL=L\"python3XY.dll\""
#endif

/* Exit status when the bundle's interpreter cannot be loaded (README, "Exit status"). */
#define EXIT_BROKEN_BUNDLE 3

/* The one argument the launcher answers itself: check the folder as every start does,
 * then exit (0: nobody else can change it) without loading the interpreter. The MSI
 * runs it right after installing the files (msi_document.folder_check), so an install
 * folder others can write fails the install by the rule of every start. */
#define CHECK_FOLDER_OPTION L"--check-folder"

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

/* What others must not be allowed (native_host/windows_acl.py's WRITE_RIGHTS): on the
 * program's own folder, adding a file too (a DLL planted beside the executable loads
 * first); on every folder above it, replacing or renaming what it holds. */
#define CHANGE_RIGHTS (DELETE | WRITE_DAC | WRITE_OWNER | GENERIC_WRITE | GENERIC_ALL)
#define FOLDER_RIGHTS (CHANGE_RIGHTS | FILE_DELETE_CHILD)
#define PROGRAM_FOLDER_RIGHTS (FOLDER_RIGHTS | FILE_ADD_FILE | FILE_ADD_SUBDIRECTORY)

/* The user, SYSTEM, Administrators, TrustedInstaller, and OWNER RIGHTS (the owner, who
 * is one of them once checked): the SIDs that may change the bundle. */
static int trusted_sid(PSID sid, PSID user)
{
    static const wchar_t *const names[] = {
        L"S-1-5-18", L"S-1-5-32-544", L"S-1-3-4",
        L"S-1-5-80-956008885-3418522649-1831038044-1853292631-2271478464",
    };
    size_t index;
    if (EqualSid(sid, user))
        return 1;
    for (index = 0; index < sizeof names / sizeof names[0]; index++) {
        PSID known = NULL;
        int same;
        if (!ConvertStringSidToSidW(names[index], &known))
            continue;
        same = EqualSid(sid, known);
        LocalFree(known);
        if (same)
            return 1;
    }
    return 0;
}

/* Why another user could change `folder` (NULL: nobody can), by its owner and DACL. */
static const wchar_t *folder_problem(const wchar_t *folder, PSID user, DWORD forbidden)
{
    PSID owner = NULL;
    PACL dacl = NULL;
    PSECURITY_DESCRIPTOR descriptor = NULL;
    const wchar_t *problem = NULL;
    WORD index;
    if (GetNamedSecurityInfoW(folder, SE_FILE_OBJECT,
                              OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION, &owner,
                              NULL, &dacl, NULL, &descriptor) != ERROR_SUCCESS)
        return L"cannot be checked (its owner and access list cannot be read)";
    if (owner == NULL || !trusted_sid(owner, user))
        problem = L"belongs to another user";
    else if (dacl == NULL)
        problem = L"has no access list: everyone may change it";
    for (index = 0; problem == NULL && index < dacl->AceCount; index++) {
        ACE_HEADER *header = NULL;
        if (!GetAce(dacl, index, (void **)&header))
            problem = L"has an access list that cannot be read";
        else if (header->AceFlags & INHERIT_ONLY_ACE || header->AceType == ACCESS_DENIED_ACE_TYPE)
            continue;
        else if (header->AceType != ACCESS_ALLOWED_ACE_TYPE)
            problem = L"has an access entry this program cannot judge";
        else if ((((ACCESS_ALLOWED_ACE *)header)->Mask & forbidden) &&
                 !trusted_sid((PSID) & ((ACCESS_ALLOWED_ACE *)header)->SidStart, user))
            problem = L"is writable by other users";
    }
    LocalFree(descriptor);
    return problem;
}

/* The rule the host applies to every program it starts, applied to itself before its
 * interpreter is loaded (docs/security.md): its folder and every folder above it must be
 * the user's (or the system's) and writable by nobody else, or another user could put
 * their own python313.dll beside it. 0 when they are; else the refusal (one line). */
static int check_own_folder(wchar_t *path)
{
    static BYTE buffer[512];
    HANDLE token = NULL;
    DWORD size = 0;
    PSID user;
    wchar_t *slash;
    DWORD forbidden = PROGRAM_FOLDER_RIGHTS;
    if (!OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &token) ||
        !GetTokenInformation(token, TokenUser, buffer, sizeof buffer, &size))
        return broken(L"cannot read its own user to check its folder", path);
    CloseHandle(token);
    user = ((TOKEN_USER *)buffer)->User.Sid;
    /* Cut the path at each backslash, from the program's folder up to the drive's root
     * (`C:\`), which Windows itself lets users add folders to. */
    while ((slash = wcsrchr(path, L'\\')) != NULL && slash > path + 2) {
        const wchar_t *problem;
        *slash = L'\0';
        problem = folder_problem(path, user, forbidden);
        if (problem != NULL) {
            fwprintf(stderr,
                     L"pedelec-native-host: its folder %ls %ls, who could replace it: "
                     L"install it into a folder only you can change (the MSI's default)\n",
                     path, problem);
            return EXIT_BROKEN_BUNDLE;
        }
        forbidden = FOLDER_RIGHTS;
    }
    return 0;
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
    {
        static wchar_t folder[32768];
        int refused;
        wcscpy(folder, dll);
        refused = check_own_folder(folder);
        if (refused != 0 || (argc == 2 && wcscmp(argv[1], CHECK_FOLDER_OPTION) == 0))
            return refused;
    }
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
