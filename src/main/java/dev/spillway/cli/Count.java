package dev.spillway.cli;

/** A number of things as the commands print it: {@code 1 batch}, {@code 3 batches}. */
final class Count {
  private Count() {}

  static String of(long n, String one, String many) {
    return n + " " + (n == 1 ? one : many);
  }
}
