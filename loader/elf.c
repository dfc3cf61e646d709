/* SPDX-License-Identifier: MIT */
/*
 * ELF: symbol lookup in a loaded object's own GNU hash and version tables
 * (what dlvsym does for a symbol the object defines), and what a library file
 * says about itself before it is loaded (machine, truncation, the
 * IBVERBS_PRIVATE_* node it needs). Nothing here loads or runs the file.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libs.h"

/* glibc relocates some d_ptr entries in place and not others. */
static const void *dyn_ptr(const struct link_map *map, ElfW(Addr) p) {
  return (const void *)(p < map->l_addr ? p + map->l_addr : p);
}

void rdmadl_elf_view_init(struct elf_view *v, const struct link_map *map, const char *prefix) {
  memset(v, 0, sizeof *v);
  v->base = map->l_addr;
  /* One pass over the dynamic section (the last entry of a tag wins). */
  const ElfW(Verdef) *verdef = NULL;
  ElfW(Word) verdefnum = 0;
  const ElfW(Dyn) *soname = NULL;
  const uint32_t *gnu_hash = NULL;
  for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
    case DT_STRTAB:
      v->strtab = dyn_ptr(map, d->d_un.d_ptr);
      break;
    case DT_STRSZ:
      v->strsz = (size_t)d->d_un.d_val;
      break;
    case DT_SYMTAB:
      v->symtab = dyn_ptr(map, d->d_un.d_ptr);
      break;
    case DT_VERSYM:
      v->versym = dyn_ptr(map, d->d_un.d_ptr);
      break;
    case DT_GNU_HASH:
      gnu_hash = dyn_ptr(map, d->d_un.d_ptr);
      break;
    case DT_VERDEF:
      verdef = dyn_ptr(map, d->d_un.d_ptr);
      break;
    case DT_VERDEFNUM:
      verdefnum = (ElfW(Word))d->d_un.d_val;
      break;
    case DT_SONAME:
      soname = d;
      break;
    }
  }
  if (!v->strtab)
    return;
  /* nbuckets, symoffset, Bloom words, shift; the Bloom filter, the buckets,
   * then the chain, whose entry I - symoffset belongs to symbol I. */
  if (gnu_hash && gnu_hash[0] && v->symtab) {
    v->nbuckets = gnu_hash[0];
    v->symoffset = gnu_hash[1];
    v->buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu_hash + 4) + gnu_hash[2]);
    v->chain = v->buckets + v->nbuckets;
  }
  if (soname)
    v->soname = v->strtab + soname->d_un.d_val;
  long best = -1;
  for (ElfW(Word) i = 0; verdef && i < verdefnum; i++) {
    const ElfW(Verdaux) *aux = (const ElfW(Verdaux) *)((const char *)verdef + verdef->vd_aux);
    const char *name = v->strtab + aux->vda_name;
    size_t n;
    if (verdef->vd_flags & VER_FLG_BASE) {
      /* the file's own name, not a node */
    } else if ((n = rdmadl_prefix_len(name, prefix)) != 0) {
      /* PREFIX<minor> or PREFIX<minor>.<sub> (MLX5_1.25.1) */
      const char *end = name + n;
      long minor = rdmadl_parse_decimal(&end, 1L << 20), sub = 0;
      if (minor >= 0 && *end == '.') {
        end++;
        sub = rdmadl_parse_decimal(&end, 9);
      }
      if (*end == '\0' && minor >= 0 && sub >= 0) {
        long slot = minor * 10 + sub;
        if (minor <= RDMADL_MAX_MINOR)
          v->vi_by_slot[slot] = verdef->vd_ndx;
        if (slot > best) {
          best = slot;
          v->highest = name;
        }
      }
    } else if (rdmadl_prefix_len(name, "IBVERBS_PRIVATE_")) {
      v->private_node = name;
    } else if (rdmadl_streq(name, "RDMADL_0")) {
      v->rdmadl = 1;
    }
    if (!verdef->vd_next)
      break;
    verdef = (const ElfW(Verdef) *)((const char *)verdef + verdef->vd_next);
  }
}

/* Whether the N bytes at A and B are the same, N >= 8: a word at a time,
 * the last word overlapping the one before. */
static inline int same_bytes(const char *a, const char *b, size_t n) {
  uint64_t x, y;
  for (size_t k = 0; k + 8 < n; k += 8) {
    memcpy(&x, a + k, 8);
    memcpy(&y, b + k, 8);
    if (x != y)
      return 0;
  }
  memcpy(&x, a + n - 8, 8);
  memcpy(&y, b + n - 8, 8);
  return x == y;
}

/* The object's tables as one lookup reads them, in locals the compiler
 * keeps in registers across the binding's stores. */
struct tables {
  const char *strtab;
  size_t strsz;
  const ElfW(Sym) * symtab;
  const ElfW(Half) * versym;
  const uint32_t *buckets, *chain;
  uint32_t nbuckets, symoffset;
};

/* Whether the object's name at OFF in its string table is NAME (LEN bytes
 * and the terminator). The words read stay inside the table (DT_STRSZ);
 * without its size, or for a short name, strcmp. */
__attribute__((always_inline)) static inline int name_is(const struct tables *t, ElfW(Word) off,
                                                         const char *name, size_t len) {
  if (len + 1 >= 8 && (size_t)off + len + 1 <= t->strsz)
    return same_bytes(t->strtab + off, name, len + 1);
  return strcmp(t->strtab + off, name) == 0;
}

/* Symbol IDX (NAME) at the version index WANT as the object itself defines
 * it (hidden, i.e. non-default, versions included, as dlvsym finds them),
 * or NULL. *FALLBACK is set when the object's tables cannot answer (no GNU
 * hash, an IFUNC) and dlvsym must. The hash is computed at build time
 * (gen/rdmadl_hashes.h). No Bloom filter test: nearly every symbol looked
 * up is there, and the bucket answers for one that is not. */
__attribute__((always_inline)) static inline const ElfW(Sym) *
    lookup(const struct tables *t, const struct rdmadl_sym_meta *m, const char *name,
           ElfW(Half) want, int *fallback) {
  if (t->versym && !want)
    return NULL; /* the object does not define that node */
  if (!t->buckets) {
    *fallback = 1;
    return NULL;
  }
  const uint32_t hash = m->hash;
  uint32_t i = t->buckets[hash % t->nbuckets];
  if (i < t->symoffset)
    return NULL;
  for (;; i++) {
    uint32_t h2 = t->chain[i - t->symoffset];
    const ElfW(Sym) *s = &t->symtab[i];
    /* Unversioned objects: dlvsym accepts the plain symbol. */
    if ((h2 | 1) == (hash | 1) && s->st_shndx != SHN_UNDEF &&
        (!t->versym || (t->versym[i] & 0x7fff) == want) && name_is(t, s->st_name, name, m->len)) {
      if (ELF64_ST_TYPE(s->st_info) == STT_GNU_IFUNC) {
        *fallback = 1;
        return NULL;
      }
      return s;
    }
    if (h2 & 1)
      return NULL;
  }
}

static void tables_of(struct tables *t, const struct elf_view *v) {
  t->strtab = v->strtab;
  t->strsz = v->strsz;
  t->symtab = v->symtab;
  t->versym = v->versym;
  t->buckets = v->buckets;
  t->chain = v->chain;
  t->nbuckets = v->nbuckets;
  t->symoffset = v->symoffset;
}

void *rdmadl_elf_lookup(const struct elf_view *v, size_t idx, int *fallback) {
  struct tables t;
  tables_of(&t, v);
  const struct rdmadl_sym_meta *m = &rdmadl_sym_meta[idx];
  const ElfW(Sym) *s = lookup(&t, m, rdmadl_sym_name(idx), v->vi_by_slot[m->slot], fallback);
  return s ? (void *)(v->base + s->st_value) : NULL;
}

size_t rdmadl_elf_bind(const struct elf_view *v, void *handle, size_t first, size_t n) {
  if (!n)
    return 0;
  struct tables t;
  tables_of(&t, v);
  const ElfW(Addr) base = v->base;
  /* The names are in one object at the offsets the table gives. */
  const char *names = rdmadl_sym_name(first) - rdmadl_sym_meta[first].name;
  size_t missing = 0;
  for (size_t i = first; i < first + n; i++) {
    const struct rdmadl_sym_meta *m = &rdmadl_sym_meta[i];
    int fallback = 0;
    const ElfW(Sym) *s = lookup(&t, m, names + m->name, v->vi_by_slot[m->slot], &fallback);
    void *f = s ? (void *)(base + s->st_value) : NULL;
    if (__builtin_expect(fallback, 0))
      f = dlvsym(handle, rdmadl_sym_name(i), rdmadl_sym_node(i));
    if (!f) {
      missing++;
      DEBUGF("%s@%s: missing", rdmadl_sym_name(i), rdmadl_sym_node(i));
      continue;
    }
    DEBUGF("%s@%s: %p", rdmadl_sym_name(i), rdmadl_sym_node(i), f);
    __atomic_store_n(&rdmadl_fn[i], f, __ATOMIC_RELEASE);
  }
  return missing;
}

int rdmadl_elf_needs_node(const struct link_map *map, const char *prefix) {
  const ElfW(Verneed) *vn = NULL;
  const char *strtab = NULL;
  ElfW(Word) count = 0;
  if (!map->l_ld)
    return 0;
  for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; d++) {
    if (d->d_tag == DT_VERNEED)
      vn = dyn_ptr(map, d->d_un.d_ptr);
    else if (d->d_tag == DT_VERNEEDNUM)
      count = (ElfW(Word))d->d_un.d_val;
    else if (d->d_tag == DT_STRTAB)
      strtab = dyn_ptr(map, d->d_un.d_ptr);
  }
  for (ElfW(Word) i = 0; vn && strtab && i < count; i++) {
    const ElfW(Vernaux) *aux = (const ElfW(Vernaux) *)((const char *)vn + vn->vn_aux);
    for (ElfW(Half) j = 0; j < vn->vn_cnt; j++) {
      if (rdmadl_prefix_len(strtab + aux->vna_name, prefix))
        return 1;
      if (!aux->vna_next)
        break;
      aux = (const ElfW(Vernaux) *)((const char *)aux + aux->vna_next);
    }
    if (!vn->vn_next)
      break;
    vn = (const ElfW(Verneed) *)((const char *)vn + vn->vn_next);
  }
  return 0;
}

/* What the first bytes of an ELF file say it was built for, when that is not
 * this process; NULL when it matches or is not an ELF file. */
static const char *machine_name(unsigned m) {
  switch (m) {
  case EM_386:
    return "i386";
  case EM_X86_64:
    return "x86-64";
  case EM_AARCH64:
    return "AArch64";
  case EM_ARM:
    return "ARM";
  case EM_PPC:
    return "PowerPC";
  case EM_PPC64:
    return "PowerPC64";
  case EM_S390:
    return "S/390";
  case EM_RISCV:
    return "RISC-V";
  case EM_MIPS:
    return "MIPS";
  case 258:
    return "LoongArch";
  }
  return "an unknown machine";
}

char *rdmadl_elf_mismatch(const char *path) {
  unsigned char e[20];
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return NULL;
  ssize_t n = read(fd, e, sizeof e);
  close(fd);
  if (n < (ssize_t)sizeof e || memcmp(e, ELFMAG, SELFMAG) != 0)
    return n >= 0 && (n < SELFMAG || memcmp(e, ELFMAG, SELFMAG) != 0)
               ? rdmadl_dup_printf("%s is not an ELF file", path)
               : NULL;
  const unsigned our_class = sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const unsigned our_data = ELFDATA2LSB;
  unsigned machine =
      e[EI_DATA] == ELFDATA2LSB ? e[18] | (unsigned)e[19] << 8 : (unsigned)e[18] << 8 | e[19];
#else
  const unsigned our_data = ELFDATA2MSB;
  unsigned machine =
      e[EI_DATA] == ELFDATA2MSB ? (unsigned)e[18] << 8 | e[19] : e[18] | (unsigned)e[19] << 8;
#endif
  Dl_info info;
  unsigned our_machine = 0;
  /* Our own ELF header: the start of the object this code is in. */
  if (dladdr((const void *)&rdmadl_elf_mismatch, &info) && info.dli_fbase)
    our_machine = ((const ElfW(Ehdr) *)info.dli_fbase)->e_machine;
  if (e[EI_CLASS] == our_class && e[EI_DATA] == our_data && machine == our_machine)
    return NULL;
  return rdmadl_dup_printf(
      "%s is an ELF file for %s (%d-bit, %s-endian, e_machine %u); this process is "
      "%s (%d-bit, e_machine %u)",
      path, machine_name(machine), e[EI_CLASS] == ELFCLASS64 ? 64 : 32,
      e[EI_DATA] == ELFDATA2MSB ? "big" : "little", machine, machine_name(our_machine),
      our_class == ELFCLASS64 ? 64 : 32, our_machine);
}

const char *rdmadl_file_kind(mode_t m) {
  if (S_ISFIFO(m))
    return "a FIFO";
  if (S_ISCHR(m))
    return "a character device";
  if (S_ISBLK(m))
    return "a block device";
  if (S_ISDIR(m))
    return "a directory";
  if (S_ISSOCK(m))
    return "a socket";
  return "not a regular file";
}

/* The string at OFF of a string table of SIZE bytes, or NULL when it does
 * not end inside the table. */
static const char *str_at(const char *tab, size_t size, size_t off) {
  return off < size && memchr(tab + off, '\0', size - off) ? tab + off : NULL;
}

/* The IBVERBS_PRIVATE_* node the ELF file PATH needs from libibverbs.so.1,
 * copied into OUT: 1 when found, 0 when it needs none, -1 when PATH cannot
 * be read as an ELF file of this process's class. Every offset is checked
 * against the file; nothing of it is loaded or run. */
int rdmadl_file_needs_private(const char *path, char *out, size_t outlen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
    close(fd);
    return -1;
  }
  size_t size = (size_t)st.st_size;
  const char *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    return -1;
  int r = -1;
  ElfW(Ehdr) eh;
  memcpy(&eh, p, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
      eh.e_shentsize != sizeof(ElfW(Shdr)) || eh.e_shoff > size ||
      eh.e_shnum > (size - eh.e_shoff) / sizeof(ElfW(Shdr)))
    goto done;
  r = 0;
  for (size_t i = 0; i < eh.e_shnum && r == 0; i++) {
    ElfW(Shdr) sh, strsh;
    memcpy(&sh, p + eh.e_shoff + i * sizeof sh, sizeof sh);
    if (sh.sh_type != SHT_GNU_verneed)
      continue;
    if (sh.sh_link >= eh.e_shnum || sh.sh_offset > size || sh.sh_size > size - sh.sh_offset) {
      r = -1;
      break;
    }
    memcpy(&strsh, p + eh.e_shoff + sh.sh_link * sizeof strsh, sizeof strsh);
    if (strsh.sh_offset > size || strsh.sh_size > size - strsh.sh_offset) {
      r = -1;
      break;
    }
    const char *strtab = p + strsh.sh_offset;
    size_t end = sh.sh_offset + sh.sh_size, off = sh.sh_offset;
    for (size_t k = 0; k < sh.sh_info && off < end && end - off >= sizeof(ElfW(Verneed)); k++) {
      ElfW(Verneed) vn;
      memcpy(&vn, p + off, sizeof vn);
      const char *file = str_at(strtab, strsh.sh_size, vn.vn_file);
      size_t a = off + vn.vn_aux;
      for (size_t j = 0; j < vn.vn_cnt && a >= off && a < end && end - a >= sizeof(ElfW(Vernaux));
           j++) {
        ElfW(Vernaux) va;
        memcpy(&va, p + a, sizeof va);
        const char *name = str_at(strtab, strsh.sh_size, va.vna_name);
        if (file && name && strcmp(file, "libibverbs.so.1") == 0 &&
            strncmp(name, "IBVERBS_PRIVATE_", 16) == 0) {
          snprintf(out, outlen, "%s", name);
          r = 1;
          break;
        }
        if (!va.vna_next)
          break;
        a += va.vna_next;
      }
      if (r || !vn.vn_next)
        break;
      off += vn.vn_next;
    }
  }
done:
  munmap((void *)p, size);
  return r;
}

/* Why the ELF file PATH cannot be mapped whole, or NULL when it can (or is
 * no ELF file of this process's class: dlopen then says what is wrong). A
 * loadable segment that ends past the end of the file (a truncated copy)
 * would be mapped anyway, and dlopen touching its missing pages dies of
 * SIGBUS; the headers are read with pread, nothing is mapped. */
char *rdmadl_file_truncated(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return NULL;
  char *why = NULL;
  struct stat st;
  ElfW(Ehdr) eh;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
      memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
      eh.e_phentsize != sizeof(ElfW(Phdr)))
    goto done;
  const unsigned long long size = (unsigned long long)st.st_size;
  const unsigned long long ph_end =
      (unsigned long long)eh.e_phoff + (unsigned long long)eh.e_phnum * sizeof(ElfW(Phdr));
  if (ph_end > size) {
    why = rdmadl_dup_printf(
        "%s is truncated: its program headers end at byte %llu, the file has %llu", path, ph_end,
        size);
    goto done;
  }
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    ElfW(Phdr) ph;
    if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph)
      break;
    if (ph.p_type != PT_LOAD)
      continue;
    const unsigned long long end = (unsigned long long)ph.p_offset + ph.p_filesz;
    if (end < ph.p_offset || end > size) {
      why = rdmadl_dup_printf(
          "%s is truncated: its loadable segment at offset %llu ends at byte %llu, "
          "the file has %llu",
          path, (unsigned long long)ph.p_offset, end, size);
      break;
    }
  }
done:
  close(fd);
  return why;
}
