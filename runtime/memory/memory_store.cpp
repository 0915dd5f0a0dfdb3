// MemoryStore: ingestion with Merkle reuse, copy-on-write tables, the snapshot
// stack, and save/load through the memory file.
#include "memory/memory_store.hpp"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "base/log.hpp"
#include "memory/memory_file.hpp"
#include "memory/merkle_hash.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kComponent = "memory";

// The table behind `table`, ready to change. Shared (with a snapshot, a
// reader's view or a save in progress): replaced by a copy of its map of
// pointers, objects untouched. Held only here: changed in place. Every table
// is created non-const (make_shared<Table>), so casting the const away is sound.
template <class Table>
Table& writable(std::shared_ptr<const Table>& table) {
  if (table.use_count() != 1) table = std::make_shared<Table>(*table);
  return const_cast<Table&>(*table);  // NOLINT(cppcoreguidelines-pro-type-const-cast): see above
}

std::string text_or_printed(const Value& value) {
  if (value.is_nil()) return {};
  if (value.is_string() || value.is_keyword() || value.is_symbol()) return std::string(value.text());
  return to_sexp(value);
}

// The :ID a node names itself by, or empty when it gives none.
std::string_view given_id(const Value& node) {
  const Value& id = node.path({"PROPERTIES", "ID"});
  return id.is_string() ? id.text() : std::string_view();
}

// Checks the whole tree before anything is stored, so ingest is all or nothing.
// `where` is the node's position, "1" for the root, "1.3" for the third element
// of its :CONTENTS, and so on.
Result<void> check_node(const Value& node, const std::string& where, std::size_t depth) {
  auto refuse = [&](const std::string& what) {
    std::string named =
        given_id(node).empty() ? std::string() : " (id " + to_sexp(node.path({"PROPERTIES", "ID"})) + ")";
    return fail(ErrorCode::invalid_input, "memory: cannot ingest node " + where + named + ": " + what);
  };
  if (depth > MemoryStore::kMaxIngestDepth) {
    return fail(ErrorCode::limit_exceeded, "memory: cannot ingest node " + where + ": nested deeper than " +
                                               std::to_string(MemoryStore::kMaxIngestDepth));
  }
  if (!node.is_list()) return refuse(std::string("is ") + to_string(node.kind()) + ", expected a property list");
  const Value* type = node.get("TYPE");
  if (type == nullptr) return refuse("has no :TYPE");
  if (!type->is_keyword()) return refuse(std::string(":TYPE is ") + to_string(type->kind()) + ", expected a keyword");
  const Value& properties = node.at("PROPERTIES");
  if (auto problem = attributes_problem(properties); !problem.empty()) return refuse(":PROPERTIES " + problem);
  const Value& id = properties.at("ID");
  if (!id.is_nil() && !id.is_string())
    return refuse(std::string(":ID is ") + to_string(id.kind()) + ", expected a string");
  const Value& raw = node.at("RAW-CONTENT");
  if (!raw.is_nil() && !raw.is_string()) {
    return refuse(std::string(":RAW-CONTENT is ") + to_string(raw.kind()) + ", expected a string");
  }
  const Value& contents = node.at("CONTENTS");
  if (!contents.is_sequence())
    return refuse(std::string(":CONTENTS is ") + to_string(contents.kind()) + ", expected a list");
  std::size_t position = 0;
  for (const Value& child : contents.items()) {
    ++position;
    if (!child.is_list()) continue;  // text and other atoms between elements
    if (auto checked = check_node(child, where + "." + std::to_string(position), depth + 1); !checked) return checked;
  }
  return {};
}

}  // namespace

// One ingest: walks a checked tree with the state lock held, making each
// table writable on its first change.
struct MemoryStore::Ingestion {
  MemoryStore& store;
  std::int64_t now;

  MemoryTable& objects() { return writable(store.objects_); }
  HistoryTable& history() { return writable(store.history_); }

  // Stores `node` and its subtree; returns its id.
  std::string add(const Value& node, const std::string& parent_id) {
    const Value& type = node.at("TYPE");
    const Value& properties = node.at("PROPERTIES");
    std::string id(given_id(node));
    if (id.empty()) id = store.generate_id(*store.objects_, now);

    std::vector<std::string> children;
    std::vector<std::string> child_hashes;
    for (const Value& child : node.at("CONTENTS").items()) {
      if (!child.is_list()) continue;
      std::string child_id = add(child, id);
      child_hashes.push_back(store.objects_->find(child_id)->second->hash);
      children.push_back(std::move(child_id));
    }

    std::string content;
    if (type.is_keyword("HEADLINE")) {
      content = text_or_printed(properties.at("TITLE")) + "\n" + std::string(node.at("RAW-CONTENT").text());
    }
    std::string hash = merkle_hash(id, type, properties, content, child_hashes);

    MemoryObjectPtr object;
    if (auto archived = store.history_->find(hash); archived != store.history_->end()) {
      object = archived->second;
    } else {
      auto fresh = std::make_shared<MemoryObject>();
      fresh->id = id;
      fresh->type = type;
      fresh->attributes = properties;
      fresh->content = std::move(content);
      fresh->parent_id = parent_id;
      fresh->children = std::move(children);
      fresh->child_hashes = std::move(child_hashes);
      fresh->version = now;
      fresh->last_sync = now;
      fresh->hash = hash;
      object = std::move(fresh);
      history().emplace(std::move(hash), object);
    }
    objects().insert_or_assign(id, std::move(object));
    return id;
  }
};

MemoryStore::MemoryStore(Clock clock)
    : clock_(std::move(clock)), objects_(std::make_shared<MemoryTable>()), history_(std::make_shared<HistoryTable>()) {}

std::string MemoryStore::generate_id(const MemoryTable& table, std::int64_t now) {
  const std::string prefix = "temp-" + std::to_string(now) + "-";
  std::string id;
  do {
    id = prefix + std::to_string(next_generated_id_++);
  } while (table.contains(id));
  return id;
}

Result<std::string> MemoryStore::ingest(const Value& ast) {
  if (auto checked = check_node(ast, "1", 1); !checked) return Unexpected<Error>(std::move(checked).error());
  std::string id;
  std::size_t dropped = 0;
  {
    std::lock_guard lock(state_mutex_);
    Ingestion ingestion{*this, clock_()};
    id = ingestion.add(ast, "");
    ++generation_;
    dropped = trim_history();
  }
  report_trim(dropped);
  return id;
}

void MemoryStore::set_history_limit(std::size_t limit) {
  std::size_t dropped = 0;
  {
    std::lock_guard lock(state_mutex_);
    history_limit_ = limit;
    dropped = trim_history();
  }
  report_trim(dropped);
}

std::size_t MemoryStore::trim_history() {
  if (history_limit_ == 0 || history_->size() <= history_limit_) return 0;
  // What rollback may make live again must stay archived (every live object
  // is in the history). Consecutive snapshots often share one table.
  std::unordered_set<const MemoryObject*> held;
  std::vector<const MemoryTable*> tables{objects_.get()};
  for (const MemorySnapshot& snapshot : snapshots_) {
    if (std::find(tables.begin(), tables.end(), snapshot.objects.get()) == tables.end()) {
      tables.push_back(snapshot.objects.get());
    }
  }
  for (const MemoryTable* table : tables) {
    for (const auto& entry : *table) held.insert(entry.second.get());
  }
  struct Candidate {
    std::int64_t version;
    const std::string* hash;  // a key of history_, read before the table changes
  };
  std::vector<Candidate> candidates;
  for (const auto& [hash, object] : *history_) {
    if (!held.contains(object.get())) candidates.push_back({object->version, &hash});
  }
  const std::size_t target = history_limit_ - history_limit_ / 10;
  const std::size_t count = std::min(history_->size() - std::min(target, history_->size()), candidates.size());
  if (count == 0) return 0;
  // The oldest first; versions of the same second by hash, so the choice is the same every time.
  const auto older = [](const Candidate& a, const Candidate& b) {
    return a.version != b.version ? a.version < b.version : *a.hash < *b.hash;
  };
  std::nth_element(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(count - 1), candidates.end(),
                   older);
  std::vector<std::string> doomed;
  doomed.reserve(count);
  for (std::size_t i = 0; i < count; ++i) doomed.push_back(*candidates[i].hash);
  HistoryTable& history = writable(history_);  // may copy the table: the keys were copied first
  for (const std::string& hash : doomed) history.erase(hash);
  ++generation_;  // the next save writes the smaller history
  return count;
}

void MemoryStore::report_trim(std::size_t dropped) const {
  if (dropped == 0) return;
  log_message(LogLevel::info, kComponent, "MEMORY - History trimmed: {} old versions dropped, {} kept.", dropped,
              history_size());
}

MemoryObjectPtr MemoryStore::find(std::string_view id) const {
  std::lock_guard lock(state_mutex_);
  auto found = objects_->find(id);
  return found == objects_->end() ? nullptr : found->second;
}

MemoryObjectPtr MemoryStore::find_version(std::string_view hash) const {
  std::lock_guard lock(state_mutex_);
  auto found = history_->find(hash);
  return found == history_->end() ? nullptr : found->second;
}

std::size_t MemoryStore::size() const {
  std::lock_guard lock(state_mutex_);
  return objects_->size();
}

std::size_t MemoryStore::history_size() const {
  std::lock_guard lock(state_mutex_);
  return history_->size();
}

std::shared_ptr<const MemoryTable> MemoryStore::objects() const {
  std::lock_guard lock(state_mutex_);
  return objects_;
}

MemoryImage MemoryStore::image() const {
  std::lock_guard lock(state_mutex_);
  return MemoryImage{objects_, history_};
}

std::vector<MemoryObjectPtr> MemoryStore::query(const MemoryQuery& query) const {
  return query_memory(*objects(), query);
}

std::vector<MemoryObjectPtr> MemoryStore::with_attribute(std::string_view key, const Value& value) const {
  return objects_with_attribute(*objects(), key, value);
}

std::vector<MemoryObjectPtr> MemoryStore::tagged(std::string_view tag) const {
  return query_memory(*objects(), MemoryQuery{.tag = std::string(tag)});
}

std::vector<MemoryObjectPtr> MemoryStore::with_todo_state(std::string_view state) const {
  return query_memory(*objects(), MemoryQuery{.todo_state = std::string(state)});
}

std::vector<MemoryObjectPtr> MemoryStore::of_type(std::string_view type) const {
  return query_memory(*objects(), MemoryQuery{.type = std::string(type)});
}

std::vector<MemoryObjectPtr> MemoryStore::active_projects() const { return passepartout::active_projects(*objects()); }

std::vector<MemoryObjectPtr> MemoryStore::completed_tasks() const { return passepartout::completed_tasks(*objects()); }

void MemoryStore::snapshot() {
  {
    std::lock_guard lock(state_mutex_);
    snapshots_.push_front(MemorySnapshot{clock_(), objects_});
    if (snapshots_.size() > kMaxSnapshots) snapshots_.pop_back();
  }
  log_message(LogLevel::debug, kComponent, "MEMORY - CoW Memory snapshot created.");
}

Result<void> MemoryStore::rollback(std::size_t index) {
  bool found = false;
  {
    std::lock_guard lock(state_mutex_);
    found = index < snapshots_.size();
    if (found) {
      objects_ = snapshots_[index].objects;
      ++generation_;
    }
  }
  if (!found) {
    log_message(LogLevel::error, kComponent, "MEMORY ERROR - Snapshot {} not found.", index);
    return fail(ErrorCode::not_found, "memory: snapshot " + std::to_string(index) + " not found");
  }
  log_message(LogLevel::info, kComponent, "MEMORY - Memory rolled back to snapshot {}", index);
  return {};
}

std::size_t MemoryStore::snapshot_count() const {
  std::lock_guard lock(state_mutex_);
  return snapshots_.size();
}

std::vector<MemorySnapshot> MemoryStore::snapshots() const {
  std::lock_guard lock(state_mutex_);
  return {snapshots_.begin(), snapshots_.end()};
}

Result<void> MemoryStore::save(const std::filesystem::path& file) {
  std::lock_guard save_lock(save_mutex_);
  auto [view, generation] = [this] {
    std::lock_guard lock(state_mutex_);
    return std::pair(MemoryImage{objects_, history_}, generation_);
  }();
  auto written = write_memory_file(file, view, clock_());
  if (!written) {
    log_message(LogLevel::warn, kComponent, "MEMORY WARNING - Failed to save memory: {}", written.error().message);
    return written;
  }
  std::lock_guard lock(state_mutex_);
  saved_generation_ = generation;
  return {};
}

Result<bool> MemoryStore::save_if_dirty(const std::filesystem::path& file) {
  if (!dirty()) return false;
  auto saved = save(file);
  if (!saved) return Unexpected<Error>(std::move(saved).error());
  return true;
}

Result<bool> MemoryStore::load(const std::filesystem::path& file) {
  auto image = read_memory_file(file);
  if (!image) {
    log_message(LogLevel::warn, kComponent, "MEMORY WARNING - Failed to load snapshot: {}", image.error().message);
    return Unexpected<Error>(std::move(image).error());
  }
  if (!image->has_value()) return false;
  std::size_t dropped = 0;
  {
    std::lock_guard lock(state_mutex_);
    objects_ = std::move((*image)->objects);
    history_ = std::move((*image)->history);
    saved_generation_ = ++generation_;
    dropped = trim_history();  // a file saved under a larger limit
  }
  report_trim(dropped);
  return true;
}

bool MemoryStore::dirty() const {
  std::lock_guard lock(state_mutex_);
  return generation_ != saved_generation_;
}

}  // namespace passepartout
