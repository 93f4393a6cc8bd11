/*
** regression_driver.c -- runs a fuzz target over files without libFuzzer, so
** CI replays the committed corpus under AddressSanitizer and UBSan with any
** compiler.  Usage: ./fuzz_scan_replay FILE_OR_DIR...
*/
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_helpers.h"

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    long len;
    uint8_t *buf;
    if (f == NULL) {
        perror(path);
        return 1;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return 1;
    }
    buf = (uint8_t *)malloc(len ? (size_t)len : 1);
    if (buf == NULL || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(buf);
        return 1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)len);
    free(buf);
    return 0;
}

static int run_path(const char *path, size_t *count) {
    struct stat st;
    if (stat(path, &st) != 0) {
        perror(path);
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *dir = opendir(path);
        struct dirent *e;
        int failed = 0;
        char child[4096];
        if (dir == NULL) {
            perror(path);
            return 1;
        }
        while ((e = readdir(dir)) != NULL) {
            if (e->d_name[0] == '.') continue;
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            failed |= run_path(child, count);
        }
        closedir(dir);
        return failed;
    }
    *count += 1;
    return run_file(path);
}

int main(int argc, char **argv) {
    size_t count = 0;
    int i, failed = 0;
    for (i = 1; i < argc; i++) failed |= run_path(argv[i], &count);
    printf("%s: replayed %zu inputs\n", argv[0], count);
    return failed;
}
