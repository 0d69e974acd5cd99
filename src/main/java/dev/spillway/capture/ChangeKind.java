package dev.spillway.capture;

/** The row changes Spillway captures. Updates and truncates are never published. */
public enum ChangeKind {
  INSERT("c", "insert"),
  DELETE("d", "delete");

  private final String debeziumOp;
  private final String publishAction;

  ChangeKind(String debeziumOp, String publishAction) {
    this.debeziumOp = debeziumOp;
    this.publishAction = publishAction;
  }

  /** The action a publication's {@code publish} option names for this kind. */
  String publishAction() {
    return publishAction;
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
