// Replaces the global operator new and delete of the one test program that includes this (in exactly one of its
// source files): every form but the aligned ones (those keep the library's pair, which nothing mixes with these), all
// together, so that no block crosses allocators (AddressSanitizer checks that). Every allocation goes to
// `test_malloc(size)` (size ≥ 1), which the including program defines: nullptr makes the throwing forms throw
// std::bad_alloc and the nothrow forms return nullptr.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

void* test_malloc(std::size_t size) noexcept;

void* operator new(std::size_t size) {
  if (void* p = test_malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return test_malloc(size == 0 ? 1 : size); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return test_malloc(size == 0 ? 1 : size); }
// GCC takes the free() below for a mismatch with the new-expressions it sees inlined; it is this operator new's pair.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
