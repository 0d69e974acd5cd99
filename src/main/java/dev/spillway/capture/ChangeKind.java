package dev.spillway.capture;

/** The row changes Spillway captures. Updates and truncates are never published. */
public enum ChangeKind {
  INSERT("c"),
  DELETE("d");

  private final String debeziumOp;

  ChangeKind(String debeziumOp) {
    this.debeziumOp = debeziumOp;
  }

  /** The {@code op} code of a Debezium change envelope, or null for other codes. */
  static ChangeKind ofDebeziumOp(String op) {
    for (ChangeKind k : values()) {
      if (k.debeziumOp.equals(op)) {
        return k;
      }
    }
    return null;
  }
}
