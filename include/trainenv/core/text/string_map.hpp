// A JSON object of strings held flat: a pod's labels, its annotations. The engine looks keys up
// in them dozens of times per admission; as nlohmann values each member was a tree node and two
// strings to build and free, and a typical pod has thirty of them. A bottom header: includes
// nothing of the core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace trainenv::core {

class string_map {
 public:
  // What the JSON had where the map is read from: nothing (or null), an object, another value.
  enum class shape : std::uint8_t { absent, object, not_object };

  struct entry {
    std::string_view key;
    std::string_view value;  // empty unless is_string
    bool is_string = false;
  };

  // Fills a map of exactly `members` members whose keys and string values take `bytes` bytes
  // together (the caller counts first: one allocation holds them all).
  class writer {
   public:
    writer(std::size_t members, std::size_t bytes);
    // `value` nullptr: the member's value is not a string (a number, an object, null).
    void add(std::string_view key, const std::string_view* value);
    // The map, its entries in key order; of a key added twice, the first value.
    [[nodiscard]] string_map finish() &&;

   private:
    std::unique_ptr<char[]> bytes_;
    std::size_t used_ = 0;
    std::vector<entry> entries_;
  };

  string_map() = default;
  explicit string_map(shape s) : shape_(s) {}
  string_map(const string_map& other);
  string_map& operator=(const string_map& other);
  // The moved-from map is empty and absent, so that copying it is safe.
  string_map(string_map&& other) noexcept;
  string_map& operator=(string_map&& other) noexcept;
  ~string_map() = default;

  // The string value of `key`, or nullptr when it is absent or not a string.
  [[nodiscard]] const std::string_view* find(std::string_view key) const;
  [[nodiscard]] std::span<const entry> entries() const { return entries_; }
  [[nodiscard]] shape kind() const { return shape_; }

 private:
  std::unique_ptr<char[]> bytes_;  // every key and string value, back to back
  std::size_t size_ = 0;
  std::vector<entry> entries_;  // in key order; views into bytes_
  shape shape_ = shape::absent;
};

}  // namespace trainenv::core
