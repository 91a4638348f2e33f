// A server-side TLS stream over a beast::tcp_stream, driving OpenSSL directly through a BIO whose
// buffers exist only while there are bytes in them.
//
// Why not asio::ssl::stream: it keeps four 17 KiB buffers per connection for as long as the
// connection lives (two of its own and those of a BIO pair), about 70 KiB per idle keep-alive
// connection, and the apiserver holds many of those open. Here an idle connection keeps only
// OpenSSL's session state (SSL_MODE_RELEASE_BUFFERS drops its record buffers), and every byte
// still goes through beast::tcp_stream, so its expires_after() bounds every TLS read and write.
//
// It models Beast's AsyncReadStream and AsyncWriteStream; get_lowest_layer() reaches the
// tcp_stream. One operation of each direction at a time, as Beast's HTTP algorithms use it.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>

#include <openssl/ssl.h>
#include <boost/asio/buffer.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_prefix.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/system/error_code.hpp>

namespace trainenv::server {

class tls_stream {
 public:
  using next_layer_type = boost::beast::tcp_stream;
  using executor_type = next_layer_type::executor_type;

  tls_stream(next_layer_type next, boost::asio::ssl::context& context);
  ~tls_stream();
  tls_stream(const tls_stream&) = delete;
  tls_stream& operator=(const tls_stream&) = delete;

  executor_type get_executor() noexcept { return next_.get_executor(); }
  next_layer_type& next_layer() noexcept { return next_; }
  SSL* native_handle() noexcept { return ssl_; }

  // The server side of the handshake.
  template <class Token>
  auto async_handshake(Token&& token) {
    return run(op::handshake, nullptr, 0, std::forward<Token>(token));
  }

  // Decrypted bytes into the first buffer of `buffers` (Beast reads into one flat buffer).
  template <class MutableBuffers, class Token>
  auto async_read_some(const MutableBuffers& buffers, Token&& token) {
    const boost::asio::mutable_buffer first =
        boost::asio::buffer_sequence_begin(buffers) == boost::asio::buffer_sequence_end(buffers)
            ? boost::asio::mutable_buffer()
            : *boost::asio::buffer_sequence_begin(buffers);
    return run(op::read, first.data(), first.size(), std::forward<Token>(token));
  }

  // Completes when ciphertext has arrived, or OpenSSL holds bytes, without decrypting any: an
  // idle keep-alive connection waits for its next request with no plaintext buffer, and
  // read_available then takes the whole request in one SSL_read. Completes with eof once the
  // peer has closed (TCP, or TLS with close_notify) and nothing is left; with 0 bytes, always.
  template <class Token>
  auto async_wait_readable(Token&& token) {
    return run(op::wait, nullptr, 0, std::forward<Token>(token));
  }

  // Whether bytes have arrived that read_available could not return yet: part of a record.
  [[nodiscard]] bool mid_record() const noexcept {
    return input_.size() != 0 || SSL_has_pending(ssl_) != 0;
  }

  // Decrypted bytes into `buffer` from what has already arrived, without waiting: 0 when
  // nothing has, or when what has is not a whole record yet. Saves an asynchronous read (a trip
  // through the scheduler) per request: a request usually arrives whole, in one record. An error
  // (a bad record, the peer's close_notify or alert) returns 0 and sets `ec`; OpenSSL keeps it,
  // so the next read meets it again.
  std::size_t read_available(boost::asio::mutable_buffer buffer, boost::system::error_code& ec);

  // Encrypts up to 64 KiB of `buffers` (a header and a body: coalesced so that they leave in one
  // TLS record and one send where they fit) and sends it all.
  template <class ConstBuffers, class Token>
  auto async_write_some(const ConstBuffers& buffers, Token&& token) {
    plain_.clear();
    const auto n = std::min<std::size_t>(boost::asio::buffer_size(buffers), max_write);
    plain_.commit(boost::asio::buffer_copy(plain_.prepare(n), buffers));
    return run(op::write, plain_.data().data(), plain_.size(), std::forward<Token>(token));
  }

  // Sends close_notify; does not wait for the peer's (RFC 8446 §6.1 does not ask for it).
  template <class Token>
  auto async_shutdown(Token&& token) {
    return run(op::shutdown, nullptr, 0, std::forward<Token>(token));
  }

 private:
  enum class op { handshake, read, write, shutdown, wait };
  enum class step { done, want_read, flush };
  static constexpr std::size_t max_write = std::size_t{64} * 1024;
  static constexpr std::size_t read_chunk = std::size_t{16} * 1024 + 512;  // a whole TLS record

  // One OpenSSL call for `what`; sets `ec`/`n` when the step is done.
  step call(op what, void* data, std::size_t size, boost::system::error_code& ec, std::size_t& n);

  template <class Token>
  auto run(op what, void* data, std::size_t size, Token&& token) {
    return boost::asio::async_compose<Token, void(boost::system::error_code, std::size_t)>(
        operation{*this, what, data, size}, token, next_);
  }

  // The composed operation: call OpenSSL until it is done, sending what it wrote and reading
  // what it asks for through the tcp_stream in between.
  struct operation {
    tls_stream& s;
    op what;
    void* data;
    std::size_t size;
    boost::system::error_code result{};
    std::size_t result_n = 0;
    bool finishing = false;  // the step is done; only its output was still to be sent

    template <class Self>
    void operator()(Self& self) {
      advance(self);
    }
    // After a send of the stream's output, or a read of ciphertext.
    template <class Self>
    void operator()(Self& self, boost::system::error_code ec, std::size_t n) {
      if (s.sending_) {
        s.sending_ = false;
        s.cipher_out_.clear();
        s.cipher_out_.shrink_to_fit();
        if (ec) return self.complete(ec, 0);
        if (finishing) return self.complete(result, result_n);
      } else {
        s.received(n);
        if (ec == boost::asio::error::eof) {
          s.peer_closed_ = true;
        } else if (ec) {
          return self.complete(ec, 0);
        }
      }
      advance(self);
    }

    template <class Self>
    void advance(Self& self) {
      const auto next = s.call(what, data, size, result, result_n);
      if (!s.cipher_out_.empty()) {
        // Send first whatever OpenSSL wrote (records, alerts, tickets), then go on or finish.
        finishing = next == step::done;
        s.sending_ = true;
        return boost::asio::async_write(s.next_, boost::asio::buffer(s.cipher_out_),
                                        std::move(self));
      }
      if (next == step::done) return self.complete(result, result_n);
      s.next_.async_read_some(s.receive_buffer(), std::move(self));
    }
  };

  // Where the next ciphertext goes: with nothing buffered (an idle connection waiting for its
  // next request) a small fixed buffer, so waiting holds no heap; else the input's tail.
  boost::asio::mutable_buffer receive_buffer();
  void received(std::size_t n);
  // After the small buffer filled: the rest of what has arrived, at once, without waiting.
  void take_rest();

  friend int tls_stream_bio_read(BIO*, char*, int);
  friend int tls_stream_bio_write(BIO*, const char*, int);

  next_layer_type next_;
  SSL* ssl_ = nullptr;
  // Ciphertext received and not yet taken by OpenSSL; released once taken. A flat_buffer, not a
  // string: making room for a read must not zero 16 KiB per request.
  boost::beast::flat_buffer input_;
  std::array<char, 512> first_{};
  bool receiving_into_first_ = false;
  bool more_expected_ = false;
  bool peer_closed_ = false;
  std::string cipher_out_;  // ciphertext OpenSSL wrote, being sent
  bool sending_ = false;
  boost::beast::flat_buffer plain_;  // the bytes of the write in progress
};

}  // namespace trainenv::server
