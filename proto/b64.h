/* Matrices as base64 (RFC 4648 section 4, standard alphabet, with padding): the 64 bytes of 16
 * IEEE-754 float32 values, little-endian, column-major, in 88 characters. The encoder writes
 * straight from the float bits; the decoder is strict, so every matrix has exactly one
 * accepted text and what a client sends back is bit for bit what it received. */
#ifndef SCN_B64_H
#define SCN_B64_H

#include <stddef.h>
#include <stdint.h>

/* Characters of one matrix in base64 (64 bytes: 21 groups of 3 and one byte, padded). */
#define SCN_B64_MATRIX_LEN 88
/* Characters of n bytes in base64, with padding. */
#define SCN_B64_LEN(n) ((((n) + 2) / 3) * 4)

/* Why a text is not a matrix. */
typedef enum scn_b64_status {
  SCN_B64_OK = 0,
  SCN_B64_LENGTH,   /* not 88 characters */
  SCN_B64_CHAR,     /* a character outside the alphabet (at *at) */
  SCN_B64_PADDING,  /* not "==" at the end, or "=" before it */
  SCN_B64_PAD_BITS, /* the character before the padding has bits the bytes do not use */
} scn_b64_status;

/* Writes the base64 of n bytes to out (SCN_B64_LEN(n) characters, no NUL). */
void scn_b64_encode(char *out, const void *bytes, size_t n);
/* Writes the base64 of count matrices, one after the other (88 characters each when count is
 * 1; SCN_B64_LEN(64 * count) in all), from the float bits as little-endian bytes. A non-finite
 * element is written as JSON mode writes it: an infinity as the largest finite float32 of its
 * sign, a NaN as 0 (so every matrix received can be sent back). */
void scn_b64_encode_matrices(char *out, const float (*m)[16], size_t count);
/* Decodes the text s of len bytes into m. SCN_B64_OK, or why not (the index of a bad
 * character in *at when at is not NULL). The values are not checked for finiteness. */
scn_b64_status scn_b64_decode_matrix(const char *s, size_t len, float m[16], size_t *at);
/* Decodes the base64 of count matrices (SCN_B64_LEN(64 * count) characters, as
 * scn_b64_encode_matrices writes them) into m; the same checks as for one matrix. */
scn_b64_status scn_b64_decode_matrices(const char *s, size_t len, float (*m)[16], size_t count,
                                       size_t *at);
/* Bytes that base64 text of len characters can hold at most (before its padding). */
#define SCN_B64_DECODED_MAX(len) ((len) / 4 * 3)
/* Decodes base64 text of any length into out (room for SCN_B64_DECODED_MAX(len) bytes) and
 * the bytes written into *n, with the checks of a matrix: SCN_B64_LENGTH when len is not a
 * multiple of 4, else a character outside the alphabet (its index in *at when at is not NULL),
 * misplaced padding, or bits the bytes do not use. */
scn_b64_status scn_b64_decode_bytes(const char *s, size_t len, uint8_t *out, size_t *n, size_t *at);
/* What a status means, for error messages ("must be 88 characters", ...); the texts are about
 * a matrix, whose length is fixed. */
const char *scn_b64_status_text(scn_b64_status st);

#endif
