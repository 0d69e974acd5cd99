package dev.spillway.lfk;

import java.math.BigInteger;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

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

  /**
   * Whether the child column can hold this parent id, so a child may refer to it: for an integer
   * column, an integer within its range (an {@code integer} column may refer to a {@code bigint}
   * key; a larger id, or a {@code numeric} one with a fraction, which the cast would round onto
   * another parent's, is no child's); for other types, any id.
   */
  public boolean columnHolds(String id) {
    BigInteger max =
        switch (columnType) {
          case "smallint" -> BigInteger.valueOf(Short.MAX_VALUE);
          case "integer" -> BigInteger.valueOf(Integer.MAX_VALUE);
          case "bigint" -> BigInteger.valueOf(Long.MAX_VALUE);
          default -> null;
        };
    if (max == null) {
      return true;
    }
    if (!INTEGER.matcher(id).matches()) {
      return false;
    }
    BigInteger v = new BigInteger(id);
    return v.compareTo(max) <= 0 && v.compareTo(max.negate().subtract(BigInteger.ONE)) >= 0;
  }

  private static final Pattern INTEGER = Pattern.compile("-?[0-9]+");
}
