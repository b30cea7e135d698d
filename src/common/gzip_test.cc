#include "common/gzip.h"

#include <gtest/gtest.h>
#include <zlib.h>

namespace allot {
namespace {

std::string gunzip(const std::string& in) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out(1 << 20, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

TEST(Gzip, RoundTripsAndShrinksRepetitiveJson) {
  std::string body;
  for (int i = 0; i < 1000; ++i) body += R"({"index": 0, "model": "H100", "holders": []},)";
  const std::string gz = gzipCompress(body);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // the gzip magic
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_LT(gz.size(), body.size() / 10);
  EXPECT_EQ(gunzip(gz), body);
  EXPECT_EQ(gunzip(gzipCompress("")), "");
}

TEST(Gzip, ReadsAcceptEncoding) {
  EXPECT_TRUE(acceptsGzip("gzip"));
  EXPECT_TRUE(acceptsGzip("gzip, deflate, br"));
  EXPECT_TRUE(acceptsGzip("br;q=1.0, GZIP;q=0.5"));
  EXPECT_TRUE(acceptsGzip("*"));
  EXPECT_FALSE(acceptsGzip(""));
  EXPECT_FALSE(acceptsGzip("identity"));
  EXPECT_FALSE(acceptsGzip("br, deflate"));
  EXPECT_FALSE(acceptsGzip("gzip;q=0"));
  EXPECT_FALSE(acceptsGzip("gzip; q=0.000"));
  EXPECT_FALSE(acceptsGzip("x-gzip"));
}

}  // namespace
}  // namespace allot
