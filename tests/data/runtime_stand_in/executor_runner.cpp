#include <cstdio>

extern const int shader_bytes;

int main() {
  std::printf("%d\n", shader_bytes);
  return 0;
}
