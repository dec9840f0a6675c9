/*
 * pty.c: arb_pty, a terminal of a given size for the tests of programs that
 * draw on one (tests/cli/top.sh drives `arbiter top` with it):
 *
 *   arb_pty ROWS COLS OUTFILE -- COMMAND [ARG]...
 *
 * runs COMMAND on a new pseudo-terminal of ROWS x COLS, copies everything
 * it writes to OUTFILE (as the terminal got it: escape codes, \r\n), and
 * reads commands from its own standard input, one a line:
 *
 *   resize ROWS COLS   set the terminal's size (the kernel sends SIGWINCH)
 *   key TEXT           type TEXT (\\n, \\003 and the like as in C)
 *
 * It exits with COMMAND's exit status (128 + N for signal N), 70 when it
 * cannot start, 64 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Unescape \n, \r, \t, \\ and \NNN (octal) in place; the new length. */
static size_t unescape(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (*p != '\\' || !p[1]) {
            *o++ = *p;
            continue;
        }
        p++;
        if (*p >= '0' && *p <= '7') {
            int v = 0, k = 0;
            while (k < 3 && *p >= '0' && *p <= '7')
                v = v * 8 + (*p++ - '0'), k++;
            p--;
            *o++ = (char)v;
        } else {
            *o++ = *p == 'n' ? '\n' : *p == 'r' ? '\r' : *p == 't' ? '\t' : *p;
        }
    }
    return (size_t)(o - s);
}

static void command(int master, char *line)
{
    int r, c;
    char *nl = strchr(line, '\n');
    if (nl)
        *nl = '\0';
    if (sscanf(line, "resize %d %d", &r, &c) == 2) {
        struct winsize ws = {.ws_row = (unsigned short)r, .ws_col = (unsigned short)c};
        if (ioctl(master, TIOCSWINSZ, &ws) < 0)
            perror("arb_pty: TIOCSWINSZ");
    } else if (strncmp(line, "key ", 4) == 0) {
        size_t n = unescape(line + 4);
        if (write(master, line + 4, n) < 0)
            perror("arb_pty: write");
    } else if (line[0]) {
        fprintf(stderr, "arb_pty: unknown command '%s' (resize ROWS COLS | key TEXT)\n", line);
    }
}

int main(int argc, char **argv)
{
    if (argc < 6 || strcmp(argv[4], "--") != 0) {
        fprintf(stderr, "usage: arb_pty ROWS COLS OUTFILE -- COMMAND [ARG]...\n");
        return 64;
    }
    struct winsize ws = {.ws_row = (unsigned short)atoi(argv[1]),
                         .ws_col = (unsigned short)atoi(argv[2])};
    FILE *out = fopen(argv[3], "w");
    int master, status = 0;
    if (!out) {
        perror(argv[3]);
        return 70;
    }
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    if (pid < 0) {
        perror("arb_pty: forkpty");
        fclose(out);
        return 70;
    }
    if (pid == 0) {
        execvp(argv[5], argv + 5);
        perror(argv[5]);
        _exit(127);
    }
    signal(SIGPIPE, SIG_IGN);
    struct pollfd p[2] = {{.fd = master, .events = POLLIN}, {.fd = STDIN_FILENO, .events = POLLIN}};
    char buf[4096], line[1024];
    size_t ln = 0;
    int in_open = 1;
    for (;;) {
        int r = poll(p, in_open ? 2 : 1, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t k = read(master, buf, sizeof buf);
            if (k <= 0) /* EIO: the command and all it started closed the terminal */
                break;
            fwrite(buf, 1, (size_t)k, out);
            fflush(out);
        }
        if (in_open && (p[1].revents & (POLLIN | POLLHUP))) {
            ssize_t k = read(STDIN_FILENO, buf, sizeof buf);
            if (k <= 0) {
                in_open = 0;
                continue;
            }
            for (ssize_t i = 0; i < k; i++) {
                if (ln + 1 < sizeof line)
                    line[ln++] = buf[i];
                if (buf[i] == '\n') {
                    line[ln] = '\0';
                    command(master, line);
                    ln = 0;
                }
            }
        }
    }
    fclose(out);
    if (waitpid(pid, &status, 0) < 0)
        return 70;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
