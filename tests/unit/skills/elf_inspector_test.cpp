// inspect_elf: real fixture libraries are complete, every truncation and every
// header that is not a shared object is not, and unique symbols are found.
#include "skills/elf_inspector.hpp"

#include <elf.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <random>

#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::string bytes(static_cast<std::size_t>(fs::file_size(file)), '\0');
  REQUIRE(in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())));
  return bytes;
}

std::string fixture_bytes(std::string_view library) {
  return read_bytes(fs::path(PP_FIXTURE_DIR) / ("lib" + std::string(library) + ".so"));
}

template <class T>
T read_struct(const std::string& bytes, std::uint64_t offset) {
  REQUIRE(offset + sizeof(T) <= bytes.size());
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <class T>
void write_struct(std::string& bytes, std::uint64_t offset, const T& value) {
  REQUIRE(offset + sizeof(T) <= bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// A bare ELF64 header of this host's byte order and the given type; no tables.
std::string elf_header(std::uint16_t type) {
  Elf64_Ehdr header{};
  std::memcpy(header.e_ident, ELFMAG, SELFMAG);
  header.e_ident[EI_CLASS] = ELFCLASS64;
  header.e_ident[EI_DATA] = std::endian::native == std::endian::little ? ELFDATA2LSB : ELFDATA2MSB;
  header.e_ident[EI_VERSION] = EV_CURRENT;
  header.e_type = type;
  header.e_machine = EM_X86_64;
  header.e_version = EV_CURRENT;
  header.e_ehsize = sizeof(Elf64_Ehdr);
  std::string bytes(sizeof header, '\0');
  std::memcpy(bytes.data(), &header, sizeof header);
  return bytes;
}

// Index of the first section header of `type` in a real library.
std::uint64_t section_index(const std::string& bytes, std::uint32_t type) {
  const auto header = read_struct<Elf64_Ehdr>(bytes, 0);
  for (std::uint64_t i = 0; i < header.e_shnum; ++i) {
    if (read_struct<Elf64_Shdr>(bytes, header.e_shoff + i * sizeof(Elf64_Shdr)).sh_type == type) return i;
  }
  FAIL("no section of type " << type);
  return 0;
}

}  // namespace

TEST_CASE("a fixture library is a complete shared object without unique symbols", "[skills][elf]") {
  auto report = inspect_elf(PP_FIXTURE_DIR "/libpass-gate-0.so");
  REQUIRE(report.has_value());
  CHECK(report->complete);
  CHECK(report->problem.empty());
  CHECK(report->gnu_unique_symbols.empty());
}

TEST_CASE("libraries built with passepartout_add_skill have no unique symbols, even one pinned by thread_local",
          "[skills][elf]") {
  for (const char* library : {"echo-v1", "echo-v2", "echo-v1-pinned", "depends-on-echo", "logging-skill"}) {
    INFO(library);
    const ElfReport report = inspect_elf_bytes(fixture_bytes(library));
    CHECK(report.complete);
    CHECK(report.gnu_unique_symbols.empty());
  }
}

TEST_CASE("a library built with GCC's unique symbols on reports them", "[skills][elf]") {
  auto report = inspect_elf(PP_FIXTURE_DIR "/libecho-v1-unique.so");
  REQUIRE(report.has_value());
  CHECK(report->complete);
#if defined(__GNUC__) && !defined(__clang__)
  REQUIRE_FALSE(report->gnu_unique_symbols.empty());
  CHECK(report->gnu_unique_symbols.size() <= ElfReport::kMaxUniqueSymbols);
  bool found = false;
  for (const std::string& name : report->gnu_unique_symbols)
    found = found || name.find("stamp_table") != std::string::npos;
  CHECK(found);
#else
  WARN("only GCC emits STB_GNU_UNIQUE symbols; this compiler built the fixture without them");
  CHECK(report->gnu_unique_symbols.empty());
#endif
}

TEST_CASE("a library truncated anywhere is incomplete and says where it ends", "[skills][elf]") {
  const std::string bytes = fixture_bytes("pass-gate-0");
  REQUIRE(inspect_elf_bytes(bytes).complete);
  const auto header = read_struct<Elf64_Ehdr>(bytes, 0);
  // GNU ld and lld write the section header table last, so every cut past the
  // ELF header falls short of it.
  const std::uint64_t table_end = header.e_shoff + std::uint64_t{header.e_shnum} * sizeof(Elf64_Shdr);
  REQUIRE(table_end == bytes.size());

  std::vector<std::size_t> lengths;
  for (std::size_t length = 0; length < bytes.size(); length += 512) lengths.push_back(length);
  for (std::size_t length = 1; length < 80; length += 7) lengths.push_back(length);
  for (std::size_t cut = 1; cut <= 16; ++cut) lengths.push_back(bytes.size() - cut);

  for (std::size_t length : lengths) {
    INFO("first " << length << " of " << bytes.size() << " bytes");
    const ElfReport report = inspect_elf_bytes(std::string_view(bytes).substr(0, length));
    CHECK_FALSE(report.complete);
    CHECK(report.gnu_unique_symbols.empty());
    if (length == 0) {
      CHECK(report.problem == "file is empty");
    } else if (length < sizeof(Elf64_Ehdr)) {
      CHECK(report.problem ==
            "truncated ELF header: file is " + std::to_string(length) + " bytes, an ELF64 header is 64");
    } else {
      CHECK(report.problem ==
            "file is " + std::to_string(length) + " bytes, its section headers end at " + std::to_string(table_end));
    }
  }
}

TEST_CASE("a section or segment reaching past the end of the file makes it incomplete", "[skills][elf]") {
  std::string bytes = fixture_bytes("pass-gate-0");
  const auto header = read_struct<Elf64_Ehdr>(bytes, 0);
  const std::string size = std::to_string(bytes.size());

  SECTION("a section's bytes") {
    const std::uint64_t index = section_index(bytes, SHT_DYNSYM);
    const std::uint64_t at = header.e_shoff + index * sizeof(Elf64_Shdr);
    auto dynsym = read_struct<Elf64_Shdr>(bytes, at);
    dynsym.sh_size = bytes.size();
    write_struct(bytes, at, dynsym);
    CHECK(inspect_elf_bytes(bytes).problem == "file is " + size + " bytes, section " + std::to_string(index) +
                                                  " (.dynsym) ends at " +
                                                  std::to_string(dynsym.sh_offset + bytes.size()));
  }
  SECTION("a section whose end overflows 64 bits") {
    const std::uint64_t index = section_index(bytes, SHT_STRTAB);
    const std::uint64_t at = header.e_shoff + index * sizeof(Elf64_Shdr);
    auto strtab = read_struct<Elf64_Shdr>(bytes, at);
    strtab.sh_offset = ~std::uint64_t{0} - 8;
    write_struct(bytes, at, strtab);
    CHECK_THAT(inspect_elf_bytes(bytes).problem,
               Catch::StartsWith("file is " + size + " bytes, section " + std::to_string(index)) &&
                   Catch::EndsWith(" ends at more than 2^64"));
  }
  SECTION("a segment's bytes") {
    // The first PT_LOAD starts at offset 0; take one that starts further in.
    std::uint64_t index = 0;
    auto load = read_struct<Elf64_Phdr>(bytes, header.e_phoff);
    while (load.p_type != PT_LOAD || load.p_offset == 0) {
      REQUIRE(++index < header.e_phnum);
      load = read_struct<Elf64_Phdr>(bytes, header.e_phoff + index * sizeof(Elf64_Phdr));
    }
    load.p_filesz = bytes.size();
    write_struct(bytes, header.e_phoff + index * sizeof(Elf64_Phdr), load);
    CHECK(inspect_elf_bytes(bytes).problem == "file is " + size + " bytes, segment " + std::to_string(index) +
                                                  " (PT_LOAD) ends at " + std::to_string(load.p_offset + bytes.size()));
  }
  SECTION("the program header table") {
    auto changed = header;
    changed.e_phnum = 0xfff0;
    write_struct(bytes, 0, changed);
    CHECK(inspect_elf_bytes(bytes).problem ==
          "file is " + size + " bytes, its program headers end at " + std::to_string(header.e_phoff + 0xfff0 * 56));
  }
  SECTION("a section header table whose end overflows 64 bits") {
    auto changed = header;
    changed.e_shoff = ~std::uint64_t{0} - 100;
    write_struct(bytes, 0, changed);
    CHECK(inspect_elf_bytes(bytes).problem == "file is " + size + " bytes, its section headers end at more than 2^64");
  }
  SECTION("a dynamic symbol table linked to a section that is not a string table") {
    const std::uint64_t index = section_index(bytes, SHT_DYNSYM);
    const std::uint64_t at = header.e_shoff + index * sizeof(Elf64_Shdr);
    auto dynsym = read_struct<Elf64_Shdr>(bytes, at);
    dynsym.sh_link = static_cast<Elf64_Word>(index);
    write_struct(bytes, at, dynsym);
    CHECK(inspect_elf_bytes(bytes).problem == "section " + std::to_string(index) + " (.dynsym) links to section " +
                                                  std::to_string(index) + ", which is not a string table");
  }
}

TEST_CASE("files that are not ELF shared objects say what they are", "[skills][elf]") {
  SECTION("the not-elf fixture") {
    auto report = inspect_elf(PP_FIXTURE_DIR "/libnot-elf.so");
    REQUIRE(report.has_value());
    CHECK_FALSE(report->complete);
    CHECK(report->problem == "not an ELF file");
  }
  SECTION("a relocatable object") {
    CHECK(inspect_elf_bytes(elf_header(ET_REL)).problem == "not a shared object: it is a relocatable object (ET_REL)");
  }
  SECTION("an executable") {
    CHECK(inspect_elf_bytes(elf_header(ET_EXEC)).problem == "not a shared object: it is an executable (ET_EXEC)");
  }
  SECTION("a core file") {
    CHECK(inspect_elf_bytes(elf_header(ET_CORE)).problem == "not a shared object: it is a core file (ET_CORE)");
  }
  SECTION("a 32-bit ELF file") {
    std::string bytes = elf_header(ET_DYN);
    bytes[EI_CLASS] = ELFCLASS32;
    CHECK(inspect_elf_bytes(bytes).problem == "not a 64-bit ELF file (EI_CLASS is 1)");
  }
  SECTION("a shared object header with nothing behind it") {
    const ElfReport report = inspect_elf_bytes(elf_header(ET_DYN));
    CHECK_FALSE(report.complete);
    CHECK(report.problem == "shared object has no program headers, so it cannot be loaded");
  }
  SECTION("a short text") {
    CHECK(inspect_elf_bytes("ab").problem == "not an ELF file");
    CHECK(inspect_elf_bytes("\x7f"
                            "E")
              .problem == "truncated ELF header: file is 2 bytes, an ELF64 header is 64");
  }
}

TEST_CASE("inspect_elf reports an empty file, a missing file and a folder", "[skills][elf]") {
  TempDir dir;
  SECTION("an empty file is incomplete") {
    std::ofstream(dir.path() / "libempty.so").flush();
    auto report = inspect_elf(dir.path() / "libempty.so");
    REQUIRE(report.has_value());
    CHECK_FALSE(report->complete);
    CHECK(report->problem == "file is empty");
  }
  SECTION("a missing file is not found") {
    auto report = inspect_elf(dir.path() / "libmissing.so");
    REQUIRE_FALSE(report.has_value());
    CHECK(report.error().code == ErrorCode::not_found);
    CHECK(report.error().message ==
          "cannot open " + (dir.path() / "libmissing.so").string() + ": No such file or directory");
  }
  SECTION("a folder is not a regular file") {
    auto report = inspect_elf(dir.path());
    REQUIRE_FALSE(report.has_value());
    CHECK(report.error().code == ErrorCode::invalid_input);
    CHECK(report.error().message == dir.path().string() + " is not a regular file");
  }
}

TEST_CASE("inspect_elf_bytes survives corrupted libraries", "[skills][elf]") {
  const std::string original = fixture_bytes("echo-v1");
  const auto header = read_struct<Elf64_Ehdr>(original, 0);
  std::mt19937_64 random(20240611);
  // Corrupt the headers and tables (where a bad offset does harm) more often than the code.
  const std::uint64_t tables = header.e_shoff;
  for (int round = 0; round < 3000; ++round) {
    std::string bytes = original;
    const int flips = 1 + static_cast<int>(random() % 8);
    for (int f = 0; f < flips; ++f) {
      std::uint64_t at = 0;
      switch (random() % 3) {
        case 0:
          at = random() % 64;
          break;
        case 1:
          at = tables + random() % (bytes.size() - tables);
          break;
        default:
          at = random() % bytes.size();
          break;
      }
      bytes[at] = static_cast<char>(random());
    }
    const ElfReport report = inspect_elf_bytes(bytes);
    CHECK(report.complete == report.problem.empty());
    CHECK(report.gnu_unique_symbols.size() <= ElfReport::kMaxUniqueSymbols);
  }
}
