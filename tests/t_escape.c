/*
 * t_escape.c - the escaping of text from files for each sink (src/util/escape.h) and the JSON
 * writer's strings (src/util/json.h), with the exact strings each must produce.
 */
#include "tap.h"
#include "util/escape.h"
#include "util/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char out[4096];

/* str_escape of src for sink equals want (a buffer big enough for anything) */
static void check(str_sink sink, const char *src, const char *want, const char *what)
{
    str_escape(out, sizeof out, src, sink);
    int pass = strcmp(out, want) == 0;
    ok(pass, "%s", what);
    if (!pass)
        diag("got '%s', want '%s'", out, want);
}

/* what a function writing on a FILE wrote */
static char *mem;
static size_t memlen;

static FILE *mem_open(void)
{
    free(mem);
    mem = NULL;
    return open_memstream(&mem, &memlen);
}

static int mem_is(FILE *f, const char *want)
{
    if (!f || fclose(f) != 0)
        return 0;
    int pass = strcmp(mem, want) == 0;
    if (!pass)
        diag("got '%s', want '%s'", mem, want);
    return pass;
}

static void test_utf8(void)
{
    static const struct {
        const char *s;
        size_t len;
    } cases[] = {
        {"a", 1}, {"", 0}, {"\xc3\xa9", 2}, {"\xe2\x9c\x93", 3}, {"\xf0\x9f\x98\x80", 4},
        {"\xf4\x8f\xbf\xbf", 4},     /* U+10FFFF */
        {"\xff", 0}, {"\x80", 0},    /* never in UTF-8; a continuation byte alone */
        {"\xc0\xaf", 0}, {"\xc1\xbf", 0}, {"\xe0\x80\xaf", 0}, {"\xf0\x80\x80\xaf", 0}, /* overlong */
        {"\xed\xa0\x80", 0},         /* a surrogate, U+D800 */
        {"\xf4\x90\x80\x80", 0},     /* U+110000 */
        {"\xe2\x82", 0}, {"\xc3", 0}, /* cut at the string's end */
        {"\xc3x", 0},
    };
    int pass = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (str_utf8_len(cases[i].s) != cases[i].len) {
            diag("case %zu: %zu, want %zu", i, str_utf8_len(cases[i].s), cases[i].len);
            pass = 0;
        }
    ok(pass, "str_utf8_len: ASCII, 2-4 byte sequences, U+10FFFF valid; invalid, overlong, surrogate, "
             "> U+10FFFF and cut sequences 0");
}

static void test_text(void)
{
    check(SINK_TEXT, "fc1 blocks.0.attn weight_grad -> 2^16 [256, 784] a|b `x` <b> & \\ 'q' \"d\"",
          "fc1 blocks.0.attn weight_grad -> 2^16 [256, 784] a|b `x` <b> & \\ 'q' \"d\"",
          "text: printable ASCII unchanged");
    check(SINK_TEXT, "fc1\x1b]0;pwned\x07", "fc1\\x1b]0;pwned\\x07", "text: ESC and BEL as \\xNN");
    check(SINK_TEXT, "a\nb\tc\rd\x7f" "e\x01", "a\\x0ab\\x09c\\x0dd\\x7fe\\x01",
          "text: newline, tab, CR, DEL and other C0 as \\xNN");
    check(SINK_TEXT, "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 \xc2\xa0",
          "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 \xc2\xa0",
          "text: valid printable UTF-8 kept (U+00A0 too)");
    check(SINK_TEXT, "x\xc2\x9b" "31m\xc2\x80", "x\\xc2\\x9b31m\\xc2\\x80",
          "text: C1 controls (U+009B, U+0080) as \\xNN per byte");
    check(SINK_TEXT, "a\xff" "b\x80\xe2\x82", "a\\xffb\\x80\\xe2\\x82", "text: invalid UTF-8 bytes as \\xNN");
    check(SINK_TEXT, "\xed\xa0\x80\xc0\xaf", "\\xed\\xa0\\x80\\xc0\\xaf",
          "text: surrogate and overlong bytes as \\xNN");
    check(SINK_TEXT, "fc1\xe2\x80\xae" "txt.exe",
          "fc1\\xe2\\x80\\xaetxt.exe", "text: U+202E (right-to-left override) as \\xNN per byte");
    check(SINK_TEXT, "\xd8\x9c\xe2\x80\x8e\xe2\x80\x8f\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac"
          "\xe2\x80\xad\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9\xe2\x80\xa8\xe2\x80\xa9",
          "\\xd8\\x9c\\xe2\\x80\\x8e\\xe2\\x80\\x8f\\xe2\\x80\\xaa\\xe2\\x80\\xab\\xe2\\x80\\xac"
          "\\xe2\\x80\\xad\\xe2\\x81\\xa6\\xe2\\x81\\xa7\\xe2\\x81\\xa8\\xe2\\x81\\xa9"
          "\\xe2\\x80\\xa8\\xe2\\x80\\xa9",
          "text: every bidirectional mark, embedding, override and isolate, and the line and "
          "paragraph separators, as \\xNN");
    check(SINK_TEXT, "\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa",
          "\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa",
          "text: their neighbours U+200D, U+202F, U+2065, U+206A kept");
    check(SINK_MD, "a\xe2\x80\xae" "b", "a\\xe2\\x80\\xaeb", "Markdown: U+202E as \\xNN");
    ok(strcmp(str_escape_ctl(out, sizeof out, "a\x1b"), "a\\x1b") == 0 &&
           str_escape_ctl(out, sizeof out, NULL) == out && out[0] == 0,
       "str_escape_ctl is the text sink; NULL is \"\"");
    str_escape(out, 6, "ab\x1b", SINK_TEXT);
    ok(strcmp(out, "ab") == 0, "text: an escape that does not fit is left out, not cut ('%s')", out);
    str_escape(out, 7, "ab\x1b", SINK_TEXT);
    ok(strcmp(out, "ab\\x1b") == 0, "text: an escape that just fits is written ('%s')", out);
    str_escape(out, 3, "\xe2\x9c\x93", SINK_TEXT);
    ok(strcmp(out, "") == 0, "text: a UTF-8 character that does not fit is left out whole");
}

static void test_md(void)
{
    check(SINK_MD, "fc1 0.0037 2.66% - -inf 1e-3 n/a (held in FP16) (steps 240-269)",
          "fc1 0.0037 2.66% - -inf 1e-3 n/a (held in FP16) (steps 240-269)", "md: ordinary text unchanged");
    check(SINK_MD, "a|b `c` *d* _e_ [f](g) <h> &amp; \\",
          "a\\|b \\`c\\` \\*d\\* \\_e\\_ \\[f\\](g) \\<h\\> \\&amp; \\\\",
          "md: | ` * _ [ ] < > & \\ escaped with a backslash");
    check(SINK_MD, "2^16 -> 2^16", "2^16 -\\> 2^16", "md: the arrow as compare has always written it");
    check(SINK_MD, "# title", "\\# title", "md: a leading # escaped");
    check(SINK_MD, "a # b", "a # b", "md: a # inside kept");
    check(SINK_MD, "- item", "\\- item", "md: a leading '- ' escaped");
    check(SINK_MD, "+ item", "\\+ item", "md: a leading '+ ' escaped");
    check(SINK_MD, "-", "-", "md: a lone '-' (an empty cell) kept");
    check(SINK_MD, "-1.5", "-1.5", "md: a negative number kept");
    check(SINK_MD, "12. x", "12\\. x", "md: a leading ordered-list marker escaped");
    check(SINK_MD, "3)", "3\\)", "md: a leading '3)' escaped");
    check(SINK_MD, "0.0037 1.5", "0.0037 1.5", "md: numbers kept");
    check(SINK_MD, "line\nnext", "line next", "md: a newline becomes a space");
    check(SINK_MD, "a\x1b[2J\tb\xff", "a\\x1b\\[2J\\x09b\\xff", "md: controls and invalid bytes as \\xNN");
    ok(strcmp(str_escape_md(out, sizeof out, "a|b"), "a\\|b") == 0, "str_escape_md is the Markdown sink");

    FILE *f = mem_open();
    str_fputs_md_code("runs/a|b.h5", f);
    ok(mem_is(f, "`runs/a\\|b.h5`"), "md code: a path in backquotes, | as \\|");
    f = mem_open();
    str_fputs_md_code("x\ny*_.h5", f);
    ok(mem_is(f, "`x\\x0ay*_.h5`"), "md code: controls as \\xNN, markup kept inside the code span");
    f = mem_open();
    str_fputs_md_code("a`b.h5", f);
    ok(mem_is(f, "a\\`b.h5"), "md code: a path with a backquote written as escaped text");
}

static void test_html(void)
{
    check(SINK_HTML, "fp16 run_1.h5", "fp16 run_1.h5", "html: ordinary text unchanged");
    check(SINK_HTML, "<img src=x onerror=\"a('b')\"> & \x1b",
          "&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt; &amp; \\x1b",
          "html: & < > \" ' as entities, controls as \\xNN");
}

static void test_gnuplot(void)
{
    check(SINK_GP, "loss.png", "loss.png", "gnuplot: ordinary text unchanged");
    check(SINK_GP, "a'b\"c`d\nsystem(\"touch PWNED\") @x \\",
          "a''b\"c`d\\x0asystem(\"touch PWNED\") @x \\",
          "gnuplot: ' doubled, newline as \\x0a, the rest kept");
    check(SINK_GP_ENH, "fp16 run_1.h5 2^16 @a &b ~c {d} \\e 'f'",
          "fp16 run\\_1.h5 2\\^16 \\@a \\&b \\~c \\{d\\} \\\\e ''f''",
          "gnuplot enhanced: markup characters escaped, ' doubled");
    check(SINK_GP_ENH, "x\x1b\xc2\x9b", "x\\\\x1b\\\\xc2\\\\x9b",
          "gnuplot enhanced: the backslash of \\xNN escaped too");
    check(SINK_GP_ENH, "fc1, fc2 and fc3", "fc1, fc2 and fc3", "gnuplot enhanced: ordinary labels unchanged");
    check(SINK_GP_ENH, "fc%d", "fc%d", "gnuplot enhanced: % kept in a title");
    check(SINK_GP_TIC, "fc%d%s%n'_1 100%", "fc%%d%%s%%n''\\_1 100%%",
          "gnuplot tic label: % doubled (a format), markup escaped, ' doubled");
    check(SINK_GP_TIC, "fc1\xe2\x80\xae", "fc1\\\\xe2\\\\x80\\\\xae", "gnuplot tic label: U+202E escaped");
    check(SINK_GP_PATH, "plots/run 1", "plots/run 1", "gnuplot file name: ordinary names unchanged");
    check(SINK_GP_PATH, "a''b\nc\"d\\e`f@g$h'i",
          "a''b\\012c\\042d\\134e\\140f\\100g\\044h'i",
          "gnuplot file name: newline, \" \\ ` @ $ as octal escapes, quotes kept");
    check(SINK_GP_PATH, "\xc3\xa9\xff\x01", "\\303\\251\\377\\001",
          "gnuplot file name: every other byte as octal, exactly (UTF-8 and invalid bytes alike)");
}

static void test_file_part(void)
{
    static const char *const cases[][2] = {
        {"fc1", "fc1"}, {"h0.attn.qkv", "h0.attn.qkv"}, {"bf16-pure", "bf16-pure"},
        {"a'b\"c`d\nsystem(\"touch PWNED\")", "a-b-c-d-system-touch-PWNED"},
        {"../../etc/passwd", "..-..-etc-passwd"}, {"", "x"}, {"///", "x"}, {"fp16 run|x", "fp16-run-x"},
        {"\xc3\xa9t\xc3\xa9", "t"},
    };
    int pass = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[64];
        if (strcmp(str_file_part(buf, sizeof buf, cases[i][0]), cases[i][1]) != 0) {
            diag("case %zu: '%s', want '%s'", i, buf, cases[i][1]);
            pass = 0;
        }
    }
    ok(pass, "str_file_part: [A-Za-z0-9._-] kept, other runs one '-', none at the end, \"x\" for nothing");
    char small[4];
    ok(strcmp(str_file_part(small, sizeof small, "abcdef"), "abc") == 0, "str_file_part: cut to the buffer");
}

static void test_fprintf_text(void)
{
    FILE *f = mem_open();
    ok(f && fprintf_text(f, "ampdiag info: '%s': %d\n", "x\x1b[2J\n", 3) == 0 &&
           mem_is(f, "ampdiag info: 'x\\x1b[2J\\x0a': 3\n"),
       "fprintf_text: the argument escaped, the line's final newline kept");
    f = mem_open();
    ok(f && fprintf_text(f, "%s", "ends\n\n") == 0 && mem_is(f, "ends\\x0a\n"),
       "fprintf_text: only one final newline kept");
    f = mem_open();
    ok(f && fprintf_text(f, "no newline %s", "\t") == 0 && mem_is(f, "no newline \\x09"),
       "fprintf_text: a part of a line");
    char big[3000], want[3000 * 4 + 2];
    for (int i = 0; i < 2999; i++)
        big[i] = i % 100 == 99 ? '\x1b' : 'a';
    big[2999] = 0;
    str_escape_ctl(want, sizeof want, big);
    strcat(want, "\n");
    f = mem_open();
    ok(f && fprintf_text(f, "%s\n", big) == 0 && mem_is(f, want),
       "fprintf_text: a line longer than its buffer");
}

static void test_json(void)
{
    static const char *const cases[][2] = {
        {"fc1", "\"fc1\""},
        {"a\"b\\c\n\t\r", "\"a\\\"b\\\\c\\n\\t\\r\""},
        {"\x1b]0;x\x07\x7f", "\"\\u001b]0;x\\u0007\\u007f\""},
        {"\xc2\x9b\xc2\x80", "\"\\u009b\\u0080\""},
        {"\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80", "\"\xc3\xa9\xe2\x9c\x93\xf0\x9f\x98\x80\""},
        {"a\xff" "b\xed\xa0\x80\xe2\x82", "\"a\\ufffdb\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\""},
        {"fc1\xe2\x80\xae" "x\xe2\x81\xa6\xd8\x9c\xe2\x80\xa8", "\"fc1\\u202ex\\u2066\\u061c\\u2028\""},
    };
    int pass = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = mem_open();
        if (!f)
            pass = 0;
        else {
            json_write_string(f, cases[i][0]);
            pass &= mem_is(f, cases[i][1]);
        }
    }
    ok(pass, "json_write_string: escapes, C0/DEL/C1 as \\u00XX, layout controls (U+202E, ...) as \\uXXXX, "
             "other valid UTF-8 kept, each invalid byte U+FFFD");
    FILE *f = mem_open();
    if (f)
        json_write_string(f, NULL);
    ok(mem_is(f, "null"), "json_write_string: NULL is null");
}

int main(void)
{
    test_utf8();
    test_text();
    test_md();
    test_html();
    test_gnuplot();
    test_file_part();
    test_fprintf_text();
    test_json();
    free(mem);
    return done_testing();
}
