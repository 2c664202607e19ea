/* A stand-in for Pedelec Desktop's Windows executable, for the lane's background-launch
 * test: installed as <dir>\Pedelec.exe beside <dir>\Pedelec.cmdline (a UTF-8 command
 * line), it records its own command line in <dir>\Pedelec.started (UTF-8), starts that
 * command line (the dev Core, which writes runtime.json; nothing when it is empty) with
 * its own environment, and exits. Built by tests/windows/setup_lane.py with x86_64-w64-mingw32-gcc -municode. */
#include <windows.h>
#include <stdio.h>
#include <wchar.h>

static int sibling(wchar_t *path, const wchar_t *suffix)
{
    DWORD n = GetModuleFileNameW(NULL, path, MAX_PATH);
    if (n == 0 || n >= MAX_PATH - 16)
        return 0;
    wchar_t *dot = wcsrchr(path, L'.');
    if (dot == NULL)
        return 0;
    wcscpy(dot, suffix);
    return 1;
}

int wmain(void)
{
    wchar_t path[MAX_PATH];
    char utf8[32768];
    wchar_t command[32768];
    STARTUPINFOW si = {sizeof si};
    PROCESS_INFORMATION pi;
    FILE *file;
    size_t length;

    if (!sibling(path, L".started") || (file = _wfopen(path, L"wb")) == NULL)
        return 2;
    length = WideCharToMultiByte(CP_UTF8, 0, GetCommandLineW(), -1, utf8, sizeof utf8, NULL, NULL);
    fwrite(utf8, 1, length > 0 ? length - 1 : 0, file);
    fclose(file);

    if (!sibling(path, L".cmdline") || (file = _wfopen(path, L"rb")) == NULL)
        return 3;
    length = fread(utf8, 1, sizeof utf8 - 1, file);
    fclose(file);
    utf8[length] = 0;
    if (length == 0)
        return 0; /* nothing to start: the .started file is the whole point */
    if (!MultiByteToWideChar(CP_UTF8, 0, utf8, -1, command, 32768))
        return 4;
    if (!CreateProcessW(NULL, command, NULL, NULL, FALSE, CREATE_NO_WINDOW, NULL, NULL, &si, &pi))
        return 5;
    CloseHandle(pi.hThread);
    CloseHandle(pi.hProcess);
    return 0;
}
