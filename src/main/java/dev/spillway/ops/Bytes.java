package dev.spillway.ops;

final class Bytes {
  private Bytes() {}

  static String human(long bytes) {
    if (bytes < 1024) {
      return bytes + " B";
    }
    String[] units = {"kB", "MB", "GB", "TB"};
    double v = bytes;
    int i = -1;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i++;
    }
    return String.format("%.1f %s", v, units[i]);
  }
}
