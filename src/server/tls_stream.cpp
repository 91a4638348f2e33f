#include "trainenv/server/tls_stream.hpp"

#include <sys/socket.h>
#include <climits>
#include <stdexcept>

#include <openssl/err.h>
#include <boost/asio/error.hpp>

namespace trainenv::server {

// The BIO between OpenSSL and the stream: reads take the ciphertext the stream received, writes
// append to what the stream will send. Neither ever blocks; "retry" tells OpenSSL to wait.
int tls_stream_bio_read(BIO* bio, char* out, int length) {
  auto& s = *static_cast<tls_stream*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (s.input_.size() == 0) {
    if (s.peer_closed_) return 0;
    BIO_set_retry_read(bio);
    return -1;
  }
  const auto n = boost::asio::buffer_copy(
      boost::asio::buffer(out, static_cast<std::size_t>(length)), s.input_.data());
  s.input_.consume(n);
  if (s.input_.size() == 0) s.input_.shrink_to_fit();
  return static_cast<int>(n);
}

int tls_stream_bio_write(BIO* bio, const char* in, int length) {
  auto& s = *static_cast<tls_stream*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  s.cipher_out_.append(in, static_cast<std::size_t>(length));
  return length;
}

namespace {

long bio_ctrl(BIO*, int command, long, void*) {
  return command == BIO_CTRL_FLUSH ? 1 : 0;
}

int bio_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* stream_bio_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "trainenv tls_stream");
    if (m == nullptr || BIO_meth_set_read(m, tls_stream_bio_read) != 1 ||
        BIO_meth_set_write(m, tls_stream_bio_write) != 1 || BIO_meth_set_ctrl(m, bio_ctrl) != 1 ||
        BIO_meth_set_create(m, bio_create) != 1) {
      throw std::runtime_error("cannot create the TLS stream's BIO method");
    }
    return m;
  }();
  return method;
}

}  // namespace

tls_stream::tls_stream(next_layer_type next, boost::asio::ssl::context& context)
    : next_(std::move(next)), ssl_(SSL_new(context.native_handle())) {
  BIO* bio = ssl_ != nullptr ? BIO_new(stream_bio_method()) : nullptr;
  if (bio == nullptr) {
    SSL_free(ssl_);
    throw std::runtime_error("cannot create a TLS session (out of memory)");
  }
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // the SSL owns the BIO, once for both directions
  SSL_set_accept_state(ssl_);
}

tls_stream::~tls_stream() {
  SSL_free(ssl_);
}

boost::asio::mutable_buffer tls_stream::receive_buffer() {
  // Small only between requests: not inside a record (OpenSSL holds part of one), and not when
  // the last receive filled its buffer (more is on its way).
  receiving_into_first_ = input_.size() == 0 && !more_expected_ && SSL_has_pending(ssl_) == 0;
  if (receiving_into_first_) return boost::asio::buffer(first_);
  return input_.prepare(read_chunk);
}

void tls_stream::received(std::size_t n) {
  if (receiving_into_first_) {
    input_.commit(boost::asio::buffer_copy(input_.prepare(n), boost::asio::buffer(first_, n)));
    more_expected_ = n == first_.size();
    if (more_expected_) take_rest();
  } else {
    input_.commit(n);
    more_expected_ = n == read_chunk;
  }
  if (input_.size() == 0) input_.shrink_to_fit();
}

void tls_stream::take_rest() {
  // A request is usually longer than first_ and has wholly arrived: waiting for the rest through
  // the reactor cost an asynchronous operation and an SSL_read that could only ask for more
  // (12,000 instructions of a small request's 274,000 under callgrind). End of stream is left
  // for the next asynchronous read to meet; an error too, though recv has taken it from the
  // socket (a reset then reads as a truncated stream).
  const auto room = input_.prepare(read_chunk);
  const auto r = ::recv(next_.socket().native_handle(), room.data(), room.size(), MSG_DONTWAIT);
  if (r <= 0) {
    // Nothing more yet. If the record is whole, the connection may go idle next: into first_.
    more_expected_ = false;
    return;
  }
  const auto n = static_cast<std::size_t>(r);
  input_.commit(n);
  more_expected_ = n == read_chunk;
}

std::size_t tls_stream::read_available(boost::asio::mutable_buffer buffer,
                                       boost::system::error_code& ec) {
  ec = {};
  if (buffer.size() == 0 || (input_.size() == 0 && SSL_has_pending(ssl_) == 0)) return 0;
  std::size_t n = 0;
  // Whatever OpenSSL writes meanwhile (a KeyUpdate's answer) leaves with the next operation.
  if (call(op::read, buffer.data(), buffer.size(), ec, n) != step::done || ec) return 0;
  return n;
}

tls_stream::step tls_stream::call(op what, void* data, std::size_t size,
                                  boost::system::error_code& ec, std::size_t& n) {
  // OpenSSL's error queue is per thread: start from an empty one. Clearing an empty queue costs
  // about 2,000 instructions in OpenSSL 3 (all 16 slots are reset), looking at it a tenth of
  // that, and the queue is almost always empty.
  if (ERR_peek_error() != 0) ERR_clear_error();
  ec = {};
  n = 0;
  int r = 0;
  switch (what) {
    case op::handshake:
      r = SSL_do_handshake(ssl_);
      if (r == 1) return step::done;
      break;
    case op::read:
      if (size == 0) return step::done;
      // Nothing received and nothing held: OpenSSL could only ask for more (an idle connection
      // between requests, every time). Asking it costs a tenth of a small request's TLS work.
      if (input_.size() == 0 && !peer_closed_ && SSL_has_pending(ssl_) == 0) return step::want_read;
      r = SSL_read(ssl_, data, static_cast<int>(std::min<std::size_t>(size, INT_MAX)));
      break;
    case op::write:
      if (size == 0) return step::done;
      r = SSL_write(ssl_, data, static_cast<int>(size));
      break;
    case op::wait:
      if (mid_record()) return step::done;
      if (!peer_closed_ && (SSL_get_shutdown(ssl_) & SSL_RECEIVED_SHUTDOWN) == 0)
        return step::want_read;
      ec = boost::asio::error::eof;
      return step::done;
    case op::shutdown:
      r = SSL_shutdown(ssl_);
      if (r >= 0) return step::done;  // close_notify written (and maybe the peer's received)
      break;
  }
  if (r > 0) {
    n = static_cast<std::size_t>(r);
    return step::done;
  }
  switch (SSL_get_error(ssl_, r)) {
    case SSL_ERROR_WANT_READ:
      if (!peer_closed_) return step::want_read;
      ec = boost::asio::ssl::error::stream_truncated;
      return step::done;
    case SSL_ERROR_WANT_WRITE:  // the BIO never refuses a write; its output is being sent
      return step::flush;
    case SSL_ERROR_ZERO_RETURN:  // the peer's close_notify
      ec = boost::asio::error::eof;
      return step::done;
    case SSL_ERROR_SSL: {
      const auto code = ERR_peek_last_error();
      ec = ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING
               ? boost::system::error_code(boost::asio::ssl::error::stream_truncated)
               : boost::system::error_code(static_cast<int>(code),
                                           boost::asio::error::get_ssl_category());
      return step::done;
    }
    default:  // SSL_ERROR_SYSCALL: the transport ended without close_notify
      ec = boost::asio::ssl::error::stream_truncated;
      return step::done;
  }
}

}  // namespace trainenv::server
