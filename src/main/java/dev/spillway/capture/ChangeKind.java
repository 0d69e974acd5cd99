package dev.spillway.capture;

import java.util.Locale;

/** The row changes Spillway captures. Updates and truncates are never published. */
public enum ChangeKind {
  INSERT("c"),
  DELETE("d");

  private final String debeziumOp;

  ChangeKind(String debeziumOp) {
    this.debeziumOp = debeziumOp;
  }

  /** The action a publication's {@code publish} option names for this kind. */
  String publishAction() {
    return name().toLowerCase(Locale.ROOT);
  }

  /**
   * The {@code op} code of a Debezium change envelope, or null for other codes. A snapshot's read
   * of a row ({@code r}) is an insert: the row is there, and capture had not seen it.
   */
  static ChangeKind ofDebeziumOp(String op) {
    if ("r".equals(op)) {
      return INSERT;
    }
    for (ChangeKind k : values()) {
      if (k.debeziumOp.equals(op)) {
        return k;
      }
    }
    return null;
  }
}
