// CsvTable: columns by name, quoted fields, line numbers, and one error naming file and line for
// every kind of malformed file.
#include "core/results/csv_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "core/data/testing/data_test_util.h"

namespace ptdp {
namespace {

using testing::TempDir;
using testing::usage_message;

std::string write_text(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  testing::write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
  return path;
}

TEST(CsvReader, ReadsNamedColumnsInAnyOrderAndIgnoresOthers) {
  TempDir dir;
  const auto path = write_text(dir, "a.csv", "z,b,a,c\n9,x,1.5,q\n8,y,-2e3,r\n");
  const CsvTable t = CsvTable::read(path, {"a", "b"});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.text(0, "b"), "x");
  EXPECT_DOUBLE_EQ(t.number(0, "a"), 1.5);
  EXPECT_DOUBLE_EQ(t.number(1, "a"), -2000.0);
  EXPECT_EQ(t.line(0), 2);
  EXPECT_EQ(t.line(1), 3);
}

TEST(CsvReader, QuotedFieldsKeepCommasAndQuotes) {
  TempDir dir;
  const auto path = write_text(dir, "q.csv", "name,v\n\"AMD EPYC, 2 cores\",1\n\"say \"\"hi\"\"\",2\n");
  const CsvTable t = CsvTable::read(path, {"name", "v"});
  EXPECT_EQ(t.text(0, "name"), "AMD EPYC, 2 cores");
  EXPECT_EQ(t.text(1, "name"), "say \"hi\"");
}

TEST(CsvReader, BlankLinesAndCrLfAreAccepted) {
  TempDir dir;
  const auto path = write_text(dir, "crlf.csv", "a,b\r\n1,2\r\n\r\n3,4\r\n");
  const CsvTable t = CsvTable::read(path, {"a", "b"});
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t.integer(1, "b"), 4);
  EXPECT_EQ(t.line(1), 4);
}

TEST(CsvReader, EmptyFieldIsNoNumber) {
  TempDir dir;
  const auto path = write_text(dir, "e.csv", "a,b\n,2\n");
  const CsvTable t = CsvTable::read(path, {"a", "b"});
  EXPECT_FALSE(t.number_or_empty(0, "a").has_value());
  EXPECT_EQ(usage_message([&] { t.number(0, "a"); }), path + ":2: column 'a' is empty, expected a number");
}

TEST(CsvReader, MissingFileNamesTheFile) {
  TempDir dir;
  const std::string path = dir.file("nope.csv");
  EXPECT_EQ(usage_message([&] { CsvTable::read(path, {"a"}); }), path + ": cannot be opened: no such file");
}

TEST(CsvReader, DirectoryIsRefused) {
  TempDir dir;
  EXPECT_EQ(usage_message([&] { CsvTable::read(dir.file(""), {"a"}); }),
            dir.file("") + ": cannot be opened: it is a directory");
}

TEST(CsvReader, EmptyFileHasNoHeader) {
  TempDir dir;
  const auto path = write_text(dir, "empty.csv", "");
  EXPECT_EQ(usage_message([&] { CsvTable::read(path, {"a"}); }), path + ":1: the file is empty (no header line)");
}

TEST(CsvReader, MissingColumnIsNamed) {
  TempDir dir;
  const auto path = write_text(dir, "m.csv", "a,b\n1,2\n");
  EXPECT_EQ(usage_message([&] { CsvTable::read(path, {"a", "tokens_per_s"}); }),
            path + ":1: no column 'tokens_per_s' in the header");
}

TEST(CsvReader, DuplicatedColumnIsNamed) {
  TempDir dir;
  const auto path = write_text(dir, "d.csv", "a,b,a\n1,2,3\n");
  EXPECT_EQ(usage_message([&] { CsvTable::read(path, {"a", "b"}); }),
            path + ":1: column 'a' appears twice in the header");
}

TEST(CsvReader, TooFewFieldsNamesTheLine) {
  TempDir dir;
  const auto path = write_text(dir, "few.csv", "a,b,c\n1,2,3\n4,5\n");
  EXPECT_EQ(usage_message([&] { CsvTable::read(path, {"a"}); }), path + ":3: 2 fields, the header has 3");
}

TEST(CsvReader, TooManyFieldsNamesTheLine) {
  TempDir dir;
  const auto path = write_text(dir, "many.csv", "a,b\n1,2,3\n");
  EXPECT_EQ(usage_message([&] { CsvTable::read(path, {"a"}); }), path + ":2: 3 fields, the header has 2");
}

TEST(CsvReader, UnclosedQuoteNamesTheLine) {
  TempDir dir;
  const auto path = write_text(dir, "quote.csv", "a,b\n1,2\n\"x,2\n");
  EXPECT_EQ(usage_message([&] { CsvTable::read(path, {"a"}); }), path + ":3: a quoted field is not closed");
}

TEST(CsvReader, BadNumberNamesLineColumnAndText) {
  TempDir dir;
  const auto path = write_text(dir, "n.csv", "a,b\n1,2\n3,1.2.3\n");
  const CsvTable t = CsvTable::read(path, {"a", "b"});
  EXPECT_EQ(usage_message([&] { t.number(1, "b"); }), path + ":3: column 'b': '1.2.3' is not a number");
  EXPECT_EQ(usage_message([&] { t.integer(1, "b"); }), path + ":3: column 'b': '1.2.3' is not an integer");
}

// inf and nan (a run that divided by a zero time) are numbers, but not finite ones: refused so,
// naming the file, the line and the column.
TEST(CsvReader, NonFiniteNumbersAreRefusedAsNotFinite) {
  TempDir dir;
  const auto path = write_text(dir, "n.csv", "a,b,c,d\n1,inf,-nan, +Infinity \n");
  const CsvTable t = CsvTable::read(path, {"a", "b", "c", "d"});
  EXPECT_EQ(usage_message([&] { t.number(0, "b"); }), path + ":2: column 'b': 'inf' is not a finite number");
  EXPECT_EQ(usage_message([&] { t.number_or_empty(0, "c"); }), path + ":2: column 'c': '-nan' is not a finite number");
  EXPECT_EQ(usage_message([&] { t.number(0, "d"); }), path + ":2: column 'd': '+Infinity' is not a finite number");
}

TEST(CsvReader, NumbersAreStrict) {
  EXPECT_EQ(parse_number("12.5"), 12.5);
  EXPECT_EQ(parse_number(" +3e2 "), 300.0);
  EXPECT_EQ(parse_number("-0.25"), -0.25);
  EXPECT_FALSE(parse_number("12abc"));
  EXPECT_FALSE(parse_number("inf"));
  EXPECT_FALSE(parse_number("nan"));
  EXPECT_FALSE(parse_number(""));
  EXPECT_FALSE(parse_number("1,5"));
}

TEST(CsvReader, ASignAfterPlusAndOtherPartialNumbersAreRefused) {
  for (const char* text : {"+-1", "++1", "+", "-", "--1", "-+1", "+ 1", "1 2", "0x10", "1e", ".", "1e400", "+inf"})
    EXPECT_FALSE(parse_number(text)) << text;
  EXPECT_EQ(parse_number("+1"), 1.0);
  EXPECT_EQ(parse_number("-1"), -1.0);
  TempDir dir;
  const auto path = write_text(dir, "sign.csv", "a\n2\n+-1\n");
  const CsvTable t = CsvTable::read(path, {"a"});
  EXPECT_EQ(t.number(0, "a"), 2.0);
  EXPECT_EQ(usage_message([&] { t.number(1, "a"); }), path + ":3: column 'a': '+-1' is not a number");
}

TEST(CsvReader, IntegersTakeALeadingPlusAsNumbersDoButNoSecondSign) {
  TempDir dir;
  const auto path = write_text(dir, "i.csv", "a\n+5\n-7\n+-1\n");
  const CsvTable t = CsvTable::read(path, {"a"});
  EXPECT_EQ(t.integer(0, "a"), 5);
  EXPECT_EQ(t.integer(1, "a"), -7);
  EXPECT_EQ(usage_message([&] { t.integer(2, "a"); }), path + ":4: column 'a': '+-1' is not an integer");
}

TEST(CsvReader, AFieldWithControlCharactersIsQuotedOnOneLine) {
  TempDir dir;
  const auto path = write_text(dir, "ctl.csv", "a\n1\t2\x01\n");
  const CsvTable t = CsvTable::read(path, {"a"});
  EXPECT_EQ(usage_message([&] { t.number(0, "a"); }), path + ":2: column 'a': '1\\t2\\x01' is not a number");
  EXPECT_EQ(usage_message([&] { t.integer(0, "a"); }), path + ":2: column 'a': '1\\t2\\x01' is not an integer");
}

}  // namespace
}  // namespace ptdp
