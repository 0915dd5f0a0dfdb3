// inspect_elf: a bounds-checked reader of ELF64 headers, section and program
// header tables and the dynamic symbol table; it never trusts an offset.
#include "skills/elf_inspector.hpp"
#include "base/errno_text.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <utility>

namespace passepartout {
namespace fs = std::filesystem;

namespace {

// offset + count * entry_size, or nothing when that overflows 64 bits.
std::optional<std::uint64_t> end_of(std::uint64_t offset, std::uint64_t count, std::uint64_t entry_size) {
  std::uint64_t length = 0;
  std::uint64_t end = 0;
  if (__builtin_mul_overflow(count, entry_size, &length) || __builtin_add_overflow(offset, length, &end)) {
    return std::nullopt;
  }
  return end;
}

std::string hex(std::uint64_t value) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  do {
    text.insert(text.begin(), kDigits[value & 0xf]);
    value >>= 4;
  } while (value != 0);
  return "0x" + text;
}

std::string type_text(std::uint16_t type) {
  switch (type) {
    case ET_NONE:
      return "of no type (ET_NONE)";
    case ET_REL:
      return "a relocatable object (ET_REL)";
    case ET_EXEC:
      return "an executable (ET_EXEC)";
    case ET_CORE:
      return "a core file (ET_CORE)";
    default:
      return "of type " + hex(type);
  }
}

std::string segment_type_text(std::uint32_t type) {
  switch (type) {
    case PT_LOAD:
      return "PT_LOAD";
    case PT_DYNAMIC:
      return "PT_DYNAMIC";
    case PT_INTERP:
      return "PT_INTERP";
    case PT_NOTE:
      return "PT_NOTE";
    case PT_PHDR:
      return "PT_PHDR";
    case PT_TLS:
      return "PT_TLS";
    case PT_GNU_EH_FRAME:
      return "PT_GNU_EH_FRAME";
    case PT_GNU_RELRO:
      return "PT_GNU_RELRO";
    default:
      return "type " + hex(type);
  }
}

// One pass over a file's bytes. Each step either succeeds or records the
// problem and returns false; a later step relies only on what earlier ones checked.
class ElfReader {
 public:
  explicit ElfReader(std::string_view bytes) : bytes_(bytes), size_(bytes.size()) {}

  ElfReport run() {
    if (read_header() && read_section_table() && read_program_table() && check_segments() && check_sections() &&
        read_unique_symbols()) {
      report_.complete = true;
    } else {
      report_.gnu_unique_symbols.clear();
    }
    return std::move(report_);
  }

 private:
  // A T copied from `offset`; the caller has checked that it lies in the file.
  template <class T>
  T read_at(std::uint64_t offset) const {
    assert(offset <= size_ && sizeof(T) <= size_ - offset);  // every caller checks the range first
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof(T));
    return value;
  }

  bool within_file(std::optional<std::uint64_t> end) const { return end && *end <= size_; }

  bool problem(std::string text) {
    report_.problem = std::move(text);
    return false;
  }

  // "file is 4096 bytes, its section headers end at 14232"; `what` ends with its verb.
  std::string past_end(const std::string& what, std::optional<std::uint64_t> end) const {
    return "file is " + std::to_string(size_) + " bytes, " + what + " at " +
           (end ? std::to_string(*end) : std::string("more than 2^64"));
  }

  bool read_header() {
    static constexpr std::string_view kMagic(ELFMAG, SELFMAG);
    if (size_ == 0) return problem("file is empty");
    if (bytes_.substr(0, kMagic.size()) != kMagic.substr(0, std::min(size_, kMagic.size()))) {
      return problem("not an ELF file");
    }
    if (size_ > EI_CLASS && bytes_[EI_CLASS] != ELFCLASS64) {
      return problem("not a 64-bit ELF file (EI_CLASS is " +
                     std::to_string(static_cast<unsigned char>(bytes_[EI_CLASS])) + ")");
    }
    static constexpr char kNativeData = std::endian::native == std::endian::little ? ELFDATA2LSB : ELFDATA2MSB;
    if (size_ > EI_DATA && bytes_[EI_DATA] != kNativeData) {
      return problem("ELF data encoding " + std::to_string(static_cast<unsigned char>(bytes_[EI_DATA])) +
                     " is not this host's byte order");
    }
    if (size_ > EI_VERSION && bytes_[EI_VERSION] != EV_CURRENT) {
      return problem("unsupported ELF version " + std::to_string(static_cast<unsigned char>(bytes_[EI_VERSION])));
    }
    if (size_ < sizeof(Elf64_Ehdr)) {
      return problem("truncated ELF header: file is " + std::to_string(size_) + " bytes, an ELF64 header is " +
                     std::to_string(sizeof(Elf64_Ehdr)));
    }
    header_ = read_at<Elf64_Ehdr>(0);
    if (header_.e_type != ET_DYN) return problem("not a shared object: it is " + type_text(header_.e_type));
    if (header_.e_ehsize < sizeof(Elf64_Ehdr)) {
      return problem("ELF header size is " + std::to_string(header_.e_ehsize) + ", an ELF64 header is " +
                     std::to_string(sizeof(Elf64_Ehdr)));
    }
    return true;
  }

  // The section header table; with more than SHN_LORESERVE sections the count
  // (and the string table index) live in section 0.
  bool read_section_table() {
    if (header_.e_shoff == 0) {
      if (header_.e_shnum != 0)
        return problem("ELF header lists " + std::to_string(header_.e_shnum) + " section headers at offset 0");
      return true;  // no section headers (e.g. stripped with sstrip): the segments say it all
    }
    if (header_.e_shentsize != sizeof(Elf64_Shdr)) {
      return problem("section header size is " + std::to_string(header_.e_shentsize) + ", expected " +
                     std::to_string(sizeof(Elf64_Shdr)));
    }
    section_count_ = header_.e_shnum;
    if (section_count_ == 0) {
      auto first_end = end_of(header_.e_shoff, 1, sizeof(Elf64_Shdr));
      if (!within_file(first_end)) return problem(past_end("its section headers end", first_end));
      section_count_ = read_at<Elf64_Shdr>(header_.e_shoff).sh_size;
      if (section_count_ == 0) return problem("ELF header has a section header offset but no sections");
    }
    auto table_end = end_of(header_.e_shoff, section_count_, sizeof(Elf64_Shdr));
    if (!within_file(table_end)) return problem(past_end("its section headers end", table_end));

    string_table_index_ = header_.e_shstrndx;
    if (string_table_index_ == SHN_XINDEX) string_table_index_ = section(0).sh_link;
    if (string_table_index_ != SHN_UNDEF && string_table_index_ >= section_count_) {
      return problem("section name table index " + std::to_string(string_table_index_) + " is past the " +
                     std::to_string(section_count_) + " sections");
    }
    return true;
  }

  bool read_program_table() {
    std::uint64_t count = header_.e_phnum;
    if (count == PN_XNUM) {
      if (section_count_ == 0) return problem("ELF header defers its program header count to a missing section 0");
      count = section(0).sh_info;
    }
    if (count == 0) return problem("shared object has no program headers, so it cannot be loaded");
    if (header_.e_phentsize != sizeof(Elf64_Phdr)) {
      return problem("program header size is " + std::to_string(header_.e_phentsize) + ", expected " +
                     std::to_string(sizeof(Elf64_Phdr)));
    }
    auto table_end = end_of(header_.e_phoff, count, sizeof(Elf64_Phdr));
    if (!within_file(table_end)) return problem(past_end("its program headers end", table_end));
    segment_count_ = count;
    return true;
  }

  bool check_segments() {
    for (std::uint64_t i = 0; i < segment_count_; ++i) {
      const auto segment = read_at<Elf64_Phdr>(header_.e_phoff + i * sizeof(Elf64_Phdr));
      if (segment.p_filesz == 0) continue;
      auto end = end_of(segment.p_offset, segment.p_filesz, 1);
      if (!within_file(end)) {
        return problem(
            past_end("segment " + std::to_string(i) + " (" + segment_type_text(segment.p_type) + ") ends", end));
      }
    }
    return true;
  }

  bool check_sections() {
    for (std::uint64_t i = 1; i < section_count_; ++i) {
      const Elf64_Shdr shdr = section(i);
      if (shdr.sh_type == SHT_NULL || shdr.sh_type == SHT_NOBITS || shdr.sh_size == 0) continue;
      auto end = end_of(shdr.sh_offset, shdr.sh_size, 1);
      if (!within_file(end)) return problem(past_end(section_label(i) + " ends", end));
    }
    return true;
  }

  // Every section's bytes lie in the file by now; symbol names are still checked one by one.
  bool read_unique_symbols() {
    for (std::uint64_t i = 1; i < section_count_; ++i) {
      const Elf64_Shdr symbols = section(i);
      if (symbols.sh_type != SHT_DYNSYM) continue;
      if (symbols.sh_entsize != sizeof(Elf64_Sym) || symbols.sh_size % sizeof(Elf64_Sym) != 0) {
        return problem(section_label(i) + " has entries of " + std::to_string(symbols.sh_entsize) + " bytes in " +
                       std::to_string(symbols.sh_size) + ", expected a multiple of " +
                       std::to_string(sizeof(Elf64_Sym)));
      }
      if (symbols.sh_link == SHN_UNDEF || symbols.sh_link >= section_count_ ||
          section(symbols.sh_link).sh_type != SHT_STRTAB) {
        return problem(section_label(i) + " links to section " + std::to_string(symbols.sh_link) +
                       ", which is not a string table");
      }
      const Elf64_Shdr names = section(symbols.sh_link);
      const std::uint64_t count = symbols.sh_size / sizeof(Elf64_Sym);
      for (std::uint64_t s = 1; s < count && report_.gnu_unique_symbols.size() < ElfReport::kMaxUniqueSymbols; ++s) {
        const auto symbol = read_at<Elf64_Sym>(symbols.sh_offset + s * sizeof(Elf64_Sym));
        if ((symbol.st_info >> 4) != STB_GNU_UNIQUE || symbol.st_shndx == SHN_UNDEF) continue;
        auto name = string_at(names, symbol.st_name);
        if (!name) {
          return problem("dynamic symbol " + std::to_string(s) + " has a name outside " +
                         section_label(symbols.sh_link));
        }
        report_.gnu_unique_symbols.emplace_back(*name);
      }
      return true;  // a shared object has at most one SHT_DYNSYM
    }
    return true;
  }

  // Section header `index`; read_section_table checked the whole table.
  Elf64_Shdr section(std::uint64_t index) const {
    assert(index < section_count_);
    return read_at<Elf64_Shdr>(header_.e_shoff + index * sizeof(Elf64_Shdr));
  }

  // The NUL-terminated string at `offset` in string table `table`, if it lies
  // entirely within both the table and the file.
  std::optional<std::string_view> string_at(const Elf64_Shdr& table, std::uint64_t offset) const {
    auto table_end = end_of(table.sh_offset, table.sh_size, 1);
    if (!within_file(table_end) || offset >= table.sh_size) return std::nullopt;
    const std::string_view text = bytes_.substr(table.sh_offset + offset, table.sh_size - offset);
    const auto nul = text.find('\0');
    if (nul == std::string_view::npos) return std::nullopt;
    return text.substr(0, nul);
  }

  // "section 27 (.shstrtab)", or "section 27" when its name cannot be read.
  std::string section_label(std::uint64_t index) const {
    std::string label = "section " + std::to_string(index);
    if (string_table_index_ == SHN_UNDEF || index >= section_count_) return label;
    auto name = string_at(section(string_table_index_), section(index).sh_name);
    if (name && !name->empty()) label += " (" + std::string(*name) + ")";
    return label;
  }

  std::string_view bytes_;
  std::uint64_t size_;
  Elf64_Ehdr header_{};
  std::uint64_t section_count_ = 0;
  std::uint64_t segment_count_ = 0;
  std::uint64_t string_table_index_ = SHN_UNDEF;
  ElfReport report_;
};

}  // namespace

ElfReport inspect_elf_bytes(std::string_view bytes) { return ElfReader(bytes).run(); }

Result<ElfReport> inspect_elf(const fs::path& file) {
  // O_NONBLOCK: opening a FIFO someone dropped in the plugin folder must not hang.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    return fail(error == ENOENT ? ErrorCode::not_found : ErrorCode::io_error,
                "cannot open " + file.string() + ": " + errno_text(error));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return fail(ErrorCode::io_error, "cannot stat " + file.string() + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return fail(ErrorCode::invalid_input, file.string() + " is not a regular file");
  const auto too_big = [&] {
    return fail(ErrorCode::limit_exceeded, file.string() + " is more than " + std::to_string(kMaxElfInspectBytes) +
                                               " bytes, the limit for inspecting a library");
  };
  if (st.st_size < 0 || static_cast<std::uint64_t>(st.st_size) > kMaxElfInspectBytes) return too_big();

  // Read to the end rather than to st_size: the file may be growing as we read it.
  std::string bytes;
  bytes.resize(static_cast<std::size_t>(st.st_size) + 1);
  std::size_t used = 0;
  for (;;) {
    if (used == bytes.size()) {
      if (bytes.size() > kMaxElfInspectBytes) return too_big();
      bytes.resize(std::min(bytes.size() * 2, kMaxElfInspectBytes + 1));
    }
    const ssize_t got = ::read(fd, bytes.data() + used, bytes.size() - used);
    if (got < 0) {
      if (errno == EINTR) continue;
      return fail(ErrorCode::io_error, "cannot read " + file.string() + ": " + errno_text(errno));
    }
    if (got == 0) break;
    used += static_cast<std::size_t>(got);
  }
  if (used > kMaxElfInspectBytes) return too_big();
  bytes.resize(used);
  return inspect_elf_bytes(bytes);
}

}  // namespace passepartout
