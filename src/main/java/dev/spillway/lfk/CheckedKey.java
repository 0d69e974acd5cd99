package dev.spillway.lfk;

import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * A loose foreign key after its tables were found in the catalogs of the databases that hold them:
 * everything cleanup needs to build its statements.
 *
 * @param childDatabase the database {@code tables:} maps the child table to
 * @param parentDatabase the database {@code tables:} maps the parent table to
 * @param childPrimaryKey the child's primary key columns (several for partitioned children)
 * @param columnType the child column's type without its modifier, such as {@code bigint} or {@code
 *     character varying}, so deleted parent ids can be cast to it ({@code = ANY(CAST(? AS
 *     bigint[]))}) and are neither cut nor rounded: a {@code varchar(3)} cast would turn a deleted
 *     {@code abcdef} into the {@code abc} of a live parent
 * @param parentPrimaryKey the parent's single primary key column, the key captured deletes carry
 * @param parentKeyType that column's type without its modifier ({@code numeric}, not {@code
 *     numeric(10,2)}), so a value cast to it is neither cut nor rounded
 * @param unsweepable why {@code lfk sweep} does not read this key, when it does not: no index to
 *     read the child column through, or key types it cannot compare safely
 */
public record CheckedKey(
    LooseForeignKey key,
    String childDatabase,
    String parentDatabase,
    List<String> childPrimaryKey,
    String columnType,
    String parentPrimaryKey,
    String parentKeyType,
    Optional<String> unsweepable) {
  public CheckedKey {
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(childDatabase, "childDatabase");
    Objects.requireNonNull(parentDatabase, "parentDatabase");
    Objects.requireNonNull(columnType, "columnType");
    Objects.requireNonNull(parentPrimaryKey, "parentPrimaryKey");
    Objects.requireNonNull(parentKeyType, "parentKeyType");
    Objects.requireNonNull(unsweepable, "unsweepable");
    childPrimaryKey = List.copyOf(childPrimaryKey);
    if (childPrimaryKey.isEmpty()) {
      throw new IllegalArgumentException("child without primary key: " + key.describe());
    }
  }
}
