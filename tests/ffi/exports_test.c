/* SPDX-License-Identifier: MIT */
/*
 * exports_test LIB - the functions LIB (librdmadl-ffi.so.0) exports must be
 * exactly the generated table (ffi/inlines.def + loader/symbols.def +
 * rdmadl/loader.h, as rdmadl_ffi_names.h): reads LIB's .dynsym itself, then
 * dlopens LIB and resolves every table name to a definition inside LIB.
 * Exit 0 when equal; 1 with the differences listed; 2 for unusable input.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdmadl_ffi_names.h"

static int cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Reads FILE whole; NULL (message printed) when it cannot. */
static unsigned char *slurp(const char *file, size_t *size) {
  FILE *f = fopen(file, "rb");
  if (!f) {
    perror(file);
    return NULL;
  }
  unsigned char *buf = NULL;
  size_t cap = 0, n = 0, got;
  do {
    if (n == cap) {
      cap = cap ? cap * 2 : 1 << 20;
      unsigned char *p = realloc(buf, cap);
      if (!p) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = p;
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
  } while (got > 0);
  fclose(f);
  *size = n;
  return buf;
}

/* The names of the defined, global, default-visibility functions in the
 * ELF64 file's .dynsym, sorted. Returns the count, or -1 (message printed). */
static long dynsym_functions(const char *file, const unsigned char *img, size_t size,
                             const char ***out) {
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
  if (size < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64) {
    fprintf(stderr, "exports_test: %s: not an ELF64 file\n", file);
    return -1;
  }
  if (eh->e_shoff == 0 || eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > size) {
    fprintf(stderr, "exports_test: %s: no section headers\n", file);
    return -1;
  }
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
  for (unsigned i = 0; i < eh->e_shnum; i++) {
    if (sh[i].sh_type != SHT_DYNSYM)
      continue;
    const Elf64_Shdr *str = &sh[sh[i].sh_link];
    if (sh[i].sh_offset + sh[i].sh_size > size || str->sh_offset + str->sh_size > size)
      break;
    const Elf64_Sym *sym = (const Elf64_Sym *)(img + sh[i].sh_offset);
    size_t n = sh[i].sh_size / sizeof *sym;
    const char **names = calloc(n, sizeof *names);
    long count = 0;
    for (size_t j = 0; names && j < n; j++) {
      unsigned bind = ELF64_ST_BIND(sym[j].st_info), type = ELF64_ST_TYPE(sym[j].st_info);
      if (sym[j].st_shndx == SHN_UNDEF || type != STT_FUNC ||
          (bind != STB_GLOBAL && bind != STB_WEAK) ||
          ELF64_ST_VISIBILITY(sym[j].st_other) != STV_DEFAULT)
        continue;
      names[count++] = (const char *)img + str->sh_offset + sym[j].st_name;
    }
    qsort(names, (size_t)count, sizeof *names, cmp);
    *out = names;
    return names ? count : -1;
  }
  fprintf(stderr, "exports_test: %s: no .dynsym section\n", file);
  return -1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: exports_test LIBRARY\n");
    return 2;
  }
  size_t size = 0;
  unsigned char *img = slurp(argv[1], &size);
  if (!img)
    return 2;
  const char **have = NULL;
  long nhave = dynsym_functions(argv[1], img, size, &have);
  if (nhave < 0) {
    free(img);
    return 2;
  }
  size_t nwant = sizeof rdmadl_ffi_names / sizeof rdmadl_ffi_names[0];
  const char **want = malloc(nwant * sizeof *want);
  if (!want)
    return 2;
  memcpy(want, rdmadl_ffi_names, sizeof rdmadl_ffi_names);
  qsort(want, nwant, sizeof *want, cmp);

  int bad = 0;
  size_t i = 0, j = 0;
  while (i < nwant || j < (size_t)nhave) {
    int c = i == nwant ? 1 : j == (size_t)nhave ? -1 : strcmp(want[i], have[j]);
    if (c < 0) {
      printf("exports_test: in the table, not exported: %s\n", want[i++]);
      bad = 1;
    } else if (c > 0) {
      printf("exports_test: exported, not in the table: %s\n", have[j++]);
      bad = 1;
    } else {
      i++, j++;
    }
  }

  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "exports_test: dlopen: %s\n", dlerror());
    return 1;
  }
  size_t resolved = 0;
  for (i = 0; i < nwant; i++) {
    void *p = dlsym(h, want[i]);
    Dl_info info;
    if (p && dladdr(p, &info) && info.dli_saddr == p && info.dli_sname &&
        strcmp(info.dli_sname, want[i]) == 0)
      resolved++;
    else
      printf("exports_test: dlsym(%s) does not resolve to LIB's own %s\n", want[i], want[i]);
  }
  /* No dlclose: the loader's diagnostics live as long as the process. */
  free(want);
  free(have);
  free(img);
  printf("exports_test: %zu in the table, %ld exported, %zu resolved by dlsym: %s\n", nwant, nhave,
         resolved, !bad && resolved == nwant ? "equal" : "DIFFERENT");
  return !bad && resolved == nwant ? 0 : 1;
}
