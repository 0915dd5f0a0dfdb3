// The memory file: encoding, validation on decode, and the crash-safe write.
#include "memory/memory_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/errno_text.hpp"
#include "base/file_io.hpp"
#include "base/state_paths.hpp"
#include "memory/merkle_hash.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout {
namespace fs = std::filesystem;

namespace {

thread_local std::optional<MemoryFileStep> injected_failure;

// --- encoding ----------------------------------------------------------------

Value string_list(const std::vector<std::string>& texts) {
  std::vector<Value> items;
  items.reserve(texts.size());
  for (const std::string& text : texts) items.push_back(Value::string(text));
  return Value::list(items);
}

Value object_to_value(const MemoryObject& object) {
  return Value::plist({
      {"ID", Value::string(object.id)},
      {"TYPE", object.type},
      {"ATTRIBUTES", object.attributes},
      {"CONTENT", Value::string(object.content)},
      {"PARENT", object.parent_id.empty() ? Value::nil() : Value::string(object.parent_id)},
      {"CHILDREN", string_list(object.children)},
      {"CHILD-HASHES", string_list(object.child_hashes)},
      {"VERSION", Value::integer(object.version)},
      {"LAST-SYNC", Value::integer(object.last_sync)},
      {"HASH", Value::string(object.hash)},
  });
}

// --- decoding ----------------------------------------------------------------

std::string quote_text(std::string_view text) { return to_sexp(Value::string(text)); }

// Reads the fields of one plist, naming it (`where`) in every error.
class FieldReader {
 public:
  FieldReader(const Value& plist, std::string where) : plist_(plist), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  void set_where(std::string where) { where_ = std::move(where); }

  Unexpected<Error> error(const std::string& what) const {
    return fail(ErrorCode::invalid_input, where_ + ": " + what);
  }

  Result<const Value*> field(std::string_view key) const {
    const Value* value = plist_.get(key);
    if (value == nullptr) return error("is missing :" + std::string(key));
    return value;
  }

  Result<std::string> string(std::string_view key, bool allow_empty) const {
    auto value = field(key);
    if (!value) return Unexpected<Error>(std::move(value).error());
    if (!(*value)->is_string()) return error(wrong_kind(key, "a string", **value));
    if (!allow_empty && (*value)->text().empty()) return error(":" + std::string(key) + " is empty");
    return std::string((*value)->text());
  }

  Result<std::int64_t> integer(std::string_view key) const {
    auto value = field(key);
    if (!value) return Unexpected<Error>(std::move(value).error());
    if (!(*value)->is_integer()) return error(wrong_kind(key, "an integer", **value));
    if ((*value)->as_integer() < 0) return error(":" + std::string(key) + " is negative");
    return (*value)->as_integer();
  }

  Result<std::string> hash(std::string_view key) const {
    auto text = string(key, true);
    if (!text) return text;
    if (!is_sha256_hex(*text))
      return error(":" + std::string(key) + " " + quote_text(*text) + " is not 64 lower-case hex digits");
    return text;
  }

  // A list of strings (NIL is the empty list); hashes when `hashes`.
  Result<std::vector<std::string>> strings(std::string_view key, bool hashes) const {
    auto value = field(key);
    if (!value) return Unexpected<Error>(std::move(value).error());
    if (!(*value)->is_sequence()) return error(wrong_kind(key, "a list", **value));
    std::vector<std::string> out;
    std::size_t index = 0;
    for (const Value& item : (*value)->items()) {
      ++index;
      std::string at = ":" + std::string(key) + " element " + std::to_string(index);
      if (!item.is_string()) return error(at + " is " + std::string(to_string(item.kind())) + ", expected a string");
      if (hashes && !is_sha256_hex(item.text())) return error(at + " is not 64 lower-case hex digits");
      if (!hashes && item.text().empty()) return error(at + " is empty");
      out.emplace_back(item.text());
    }
    return out;
  }

 private:
  static std::string wrong_kind(std::string_view key, std::string_view expected, const Value& found) {
    return ":" + std::string(key) + " is " + to_string(found.kind()) + ", expected " + std::string(expected);
  }

  const Value& plist_;
  std::string where_;
};

Result<MemoryObjectPtr> decode_object(const Value& item, const std::string& where) {
  if (!item.is_list()) {
    return fail(ErrorCode::invalid_input, where + ": is " + to_string(item.kind()) + ", expected a property list");
  }
  FieldReader fields(item, where);
  auto object = std::make_shared<MemoryObject>();

  auto id = fields.string("ID", false);
  if (!id) return Unexpected<Error>(std::move(id).error());
  object->id = std::move(*id);
  fields.set_where(where + " (id " + quote_text(object->id) + ")");

  auto type = fields.field("TYPE");
  if (!type) return Unexpected<Error>(std::move(type).error());
  if (!(*type)->is_keyword()) {
    return fields.error(std::string(":TYPE is ") + to_string((*type)->kind()) + ", expected a keyword");
  }
  object->type = **type;

  auto attributes = fields.field("ATTRIBUTES");
  if (!attributes) return Unexpected<Error>(std::move(attributes).error());
  if (auto problem = attributes_problem(**attributes); !problem.empty()) return fields.error(":ATTRIBUTES " + problem);
  object->attributes = **attributes;

  auto content = fields.string("CONTENT", true);
  if (!content) return Unexpected<Error>(std::move(content).error());
  object->content = std::move(*content);

  auto parent = fields.field("PARENT");
  if (!parent) return Unexpected<Error>(std::move(parent).error());
  if (!(*parent)->is_nil()) {
    auto parent_id = fields.string("PARENT", false);
    if (!parent_id) return Unexpected<Error>(std::move(parent_id).error());
    object->parent_id = std::move(*parent_id);
  }

  auto children = fields.strings("CHILDREN", false);
  if (!children) return Unexpected<Error>(std::move(children).error());
  auto child_hashes = fields.strings("CHILD-HASHES", true);
  if (!child_hashes) return Unexpected<Error>(std::move(child_hashes).error());
  if (children->size() != child_hashes->size()) {
    return fields.error(":CHILDREN has " + std::to_string(children->size()) + " elements but :CHILD-HASHES has " +
                        std::to_string(child_hashes->size()));
  }
  object->children = std::move(*children);
  object->child_hashes = std::move(*child_hashes);

  auto version = fields.integer("VERSION");
  if (!version) return Unexpected<Error>(std::move(version).error());
  object->version = *version;
  auto last_sync = fields.integer("LAST-SYNC");
  if (!last_sync) return Unexpected<Error>(std::move(last_sync).error());
  object->last_sync = *last_sync;

  auto hash = fields.hash("HASH");
  if (!hash) return Unexpected<Error>(std::move(hash).error());
  object->hash = std::move(*hash);
  if (std::string computed = merkle_hash(*object); computed != object->hash) {
    return fields.error(":HASH does not match its contents (they hash to " + computed + ")");
  }
  return MemoryObjectPtr(std::move(object));
}

// --- writing -----------------------------------------------------------------

// Returns 0, or the errno of the failure (injected or real) at `step`.
int injected(MemoryFileStep step) {
  if (injected_failure && *injected_failure == step) {
    injected_failure.reset();
    return EIO;
  }
  return 0;
}

// Creates `dir` and its missing parents with mode 0700.
int make_folders(const fs::path& dir) {
  std::error_code ec;
  if (dir.empty() || fs::is_directory(dir, ec)) return 0;
  if (int error = make_folders(dir.parent_path()); error != 0) return error;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno;
  return 0;
}

int write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes.remove_prefix(static_cast<std::size_t>(written));
  }
  return 0;
}

fs::path temporary_path_for(const fs::path& file) {
  static std::atomic<unsigned> counter{0};
  return file.parent_path() / ("." + file.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                               std::to_string(counter.fetch_add(1)));
}

}  // namespace

std::string encode_memory(const MemoryImage& image, std::int64_t saved_at) {
  std::string out = "(:FORMAT ";
  print_sexp(Value::string(kMemoryFileFormat), out);
  out += " :VERSION " + std::to_string(kMemoryFileVersion) + " :SAVED-AT " + std::to_string(saved_at);
  out += "\n :HISTORY (";
  for (const auto& [hash, object] : *image.history) {
    out += "\n  ";
    print_sexp(object_to_value(*object), out);
  }
  out += ")\n :OBJECTS (";
  for (const auto& [id, object] : *image.objects) {
    out += "\n  ";
    print_sexp(Value::string(object->hash), out);
  }
  out += "))\n";
  return out;
}

Result<MemoryImage> decode_memory(std::string_view text, std::string_view source) {
  const std::string who(source);
  ReaderLimits limits;
  limits.max_bytes = static_cast<std::size_t>(kMaxMemoryFileBytes);
  limits.max_depth = 65536;  // attributes are whatever was ingested; the reader is iterative
  auto root = read_sexp(text, limits);
  if (!root) return fail(root.error().code, who + ": " + root.error().message);
  if (!root->is_list()) {
    return fail(ErrorCode::invalid_input, who + ": is " + to_string(root->kind()) + ", expected a property list");
  }

  const Value& format = root->at("FORMAT");
  if (!format.is_string() || format.text() != kMemoryFileFormat) {
    return fail(ErrorCode::invalid_input, who + ": not a Passepartout memory file (:FORMAT is " + to_sexp(format) +
                                              ", expected " + quote_text(kMemoryFileFormat) + ")");
  }
  const Value& version = root->at("VERSION");
  if (!version.is_integer() || version.as_integer() < 1) {
    return fail(ErrorCode::invalid_input, who + ": :VERSION is " + to_sexp(version) + ", expected a positive integer");
  }
  if (version.as_integer() > kMemoryFileVersion) {
    return fail(ErrorCode::refused, who + ": format version " + std::to_string(version.as_integer()) +
                                        " is newer than this build reads (" + std::to_string(kMemoryFileVersion) + ")");
  }

  const Value* history_items = root->get("HISTORY");
  if (history_items == nullptr || !history_items->is_sequence()) {
    return fail(
        ErrorCode::invalid_input,
        who + ": :HISTORY is " +
            (history_items == nullptr ? std::string("missing") : std::string(to_string(history_items->kind()))) +
            ", expected a list of objects");
  }
  auto history = std::make_shared<HistoryTable>();
  std::map<std::string, std::size_t, std::less<>> position;  // hash -> 1-based position, for messages
  std::size_t index = 0;
  for (const Value& item : history_items->items()) {
    ++index;
    auto object = decode_object(item, who + ": history object " + std::to_string(index));
    if (!object) return Unexpected<Error>(std::move(object).error());
    const std::string& hash = (*object)->hash;
    if (auto [at, inserted] = position.emplace(hash, index); !inserted) {
      return fail(ErrorCode::invalid_input,
                  fmt::format("{}: history objects {} and {} have the same :HASH {}", who, at->second, index, hash));
    }
    history->emplace(hash, std::move(*object));
  }
  for (const auto& [hash, object] : *history) {
    for (std::size_t i = 0; i < object->children.size(); ++i) {
      auto child = history->find(object->child_hashes[i]);
      std::string where = who + ": history object " + std::to_string(position[hash]) + " (id " +
                          quote_text(object->id) + "): child " + std::to_string(i + 1) + " " +
                          quote_text(object->children[i]);
      if (child == history->end()) {
        return fail(ErrorCode::invalid_input,
                    where + " has hash " + object->child_hashes[i] + ", which is not in :HISTORY");
      }
      if (child->second->id != object->children[i]) {
        return fail(ErrorCode::invalid_input,
                    where + " has the hash of another object, " + quote_text(child->second->id));
      }
    }
  }

  const Value* live_items = root->get("OBJECTS");
  if (live_items == nullptr || !live_items->is_sequence()) {
    return fail(ErrorCode::invalid_input,
                who + ": :OBJECTS is " +
                    (live_items == nullptr ? std::string("missing") : std::string(to_string(live_items->kind()))) +
                    ", expected a list of hashes");
  }
  auto objects = std::make_shared<MemoryTable>();
  index = 0;
  for (const Value& item : live_items->items()) {
    ++index;
    std::string where = who + ": :OBJECTS element " + std::to_string(index);
    if (!item.is_string() || !is_sha256_hex(item.text())) {
      return fail(ErrorCode::invalid_input,
                  where + " is " + to_sexp(item) + ", expected a hash (64 lower-case hex digits)");
    }
    auto found = history->find(item.text());
    if (found == history->end()) {
      return fail(ErrorCode::invalid_input, where + " " + std::string(item.text()) + " is not in :HISTORY");
    }
    if (!objects->emplace(found->second->id, found->second).second) {
      return fail(ErrorCode::invalid_input, where + ": id " + quote_text(found->second->id) + " is live twice");
    }
  }

  MemoryImage image;
  image.objects = std::move(objects);
  image.history = std::move(history);
  return image;
}

Result<void> write_memory_file(const fs::path& file, const MemoryImage& image, std::int64_t saved_at) {
  const std::string who = "memory file '" + file.string() + "'";
  if (file.filename().empty()) return fail(ErrorCode::invalid_input, who + ": not a file name");
  const std::string text = encode_memory(image, saved_at);
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();

  if (int error = make_folders(file.parent_path()); error != 0) {
    return fail(ErrorCode::io_error, who + ": cannot create folder '" + dir.string() + "': " + errno_text(error));
  }
  const fs::path temporary = temporary_path_for(file);
  int error = injected(MemoryFileStep::create);
  int fd = -1;
  if (error == 0) {
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) error = errno;
  }
  if (error != 0) {
    return fail(ErrorCode::io_error, who + ": cannot create '" + temporary.string() + "': " + errno_text(error));
  }

  // From here on a failure removes the temporary file: the old file was never touched.
  auto abandon = [&](const char* step, int code) {
    if (fd >= 0) ::close(fd);
    ::unlink(temporary.c_str());
    return fail(ErrorCode::io_error, who + ": cannot " + step + " '" + temporary.string() + "': " + errno_text(code) +
                                         "; the previous file is unchanged");
  };
  error = injected(MemoryFileStep::write);
  if (error == 0) error = write_all(fd, text);
  if (error != 0) return abandon("write", error);
  error = injected(MemoryFileStep::sync);
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (error != 0) return abandon("sync", error);
  const bool closed = ::close(fd) == 0;
  fd = -1;
  if (!closed) return abandon("close", errno);
  error = injected(MemoryFileStep::rename);
  if (error == 0 && ::rename(temporary.c_str(), file.c_str()) != 0) error = errno;
  if (error != 0) return abandon("rename", error);
  if ((error = sync_path(dir, true)) != 0) {
    return fail(ErrorCode::io_error,
                who + ": written, but cannot sync folder '" + dir.string() + "': " + errno_text(error));
  }
  return {};
}

Result<std::optional<MemoryImage>> read_memory_file(const fs::path& file) {
  const std::string who = "memory file '" + file.string() + "'";
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<MemoryImage>();
    return fail(ErrorCode::io_error, who + ": cannot open: " + errno_text(errno));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    int error = errno;
    ::close(fd);
    return fail(ErrorCode::io_error, who + ": cannot stat: " + errno_text(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return fail(ErrorCode::invalid_input, who + ": not a regular file");
  }
  if (static_cast<std::uintmax_t>(info.st_size) > kMaxMemoryFileBytes) {
    ::close(fd);
    return fail(ErrorCode::limit_exceeded, who + ": " + std::to_string(info.st_size) + " bytes, more than the " +
                                               std::to_string(kMaxMemoryFileBytes) + " this build reads");
  }
  std::string text;
  text.resize(static_cast<std::size_t>(info.st_size));
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t got = ::read(fd, text.data() + done, text.size() - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int error = errno;
      ::close(fd);
      return fail(ErrorCode::io_error, who + ": cannot read: " + errno_text(error));
    }
    if (got == 0) break;  // shrank while being read: decode what is there
    done += static_cast<std::size_t>(got);
  }
  ::close(fd);
  text.resize(done);
  auto image = decode_memory(text, who);
  if (!image) return Unexpected<Error>(std::move(image).error());
  return std::optional<MemoryImage>(std::move(*image));
}

fs::path default_memory_file() {
  if (const char* path = std::getenv("MEMORY_SNAPSHOT_PATH"); path != nullptr && *path != '\0') return path;
  return default_state_dir() / "memory.sexp";
}

void fail_next_write_for_test(MemoryFileStep step) { injected_failure = step; }

}  // namespace passepartout
