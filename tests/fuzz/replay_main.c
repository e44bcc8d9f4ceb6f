/* replay_main.c — runs a libFuzzer target over its regression corpus
 * without libFuzzer, so make check replays every input a fuzzer ever
 * found (and the seeds) with the ordinary compiler. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *current_input;

/* The targets abort() on a broken invariant; name the input that did it. */
static void on_abort(int sig)
{
    (void) sig;
    fprintf(stderr, "replay: invariant violated by %s\n", current_input);
    printf("0 passed, 1 failed\n");
    fflush(stdout);
    _exit(1);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : CORPUS_DIR;
    static uint8_t buf[1 << 20];
    struct dirent *de;
    DIR *d = opendir(dir);
    int count = 0;

    signal(SIGABRT, on_abort);
    if (!d) {
        perror(dir);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    while ((de = readdir(d)) != NULL) {
        char path[4096];
        FILE *f;
        size_t n;

        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        f = fopen(path, "rb");
        if (!f)
            continue;
        n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        current_input = path;
        LLVMFuzzerTestOneInput(buf, n);
        count++;
    }
    closedir(d);
    if (count == 0) {
        fprintf(stderr, "%s: empty corpus\n", dir);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    printf("%d passed, 0 failed (corpus %s)\n", count, dir);
    return 0;
}
