package dev.spillway.lfk;

import java.math.BigDecimal;
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
 * @param parentPrimaryKey the parent's primary key column children refer to: its only one, or the
 *     {@code id} of a partitioned parent's key of several
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
   * A parent id as the child column's value, or empty when the column cannot hold it, so no child
   * refers to it: for an integer column, an integer within its range, written without a fraction
   * (an {@code integer} column may refer to a {@code bigint} key past its range, or to a {@code
   * numeric(10,2)} key, whose {@code 5.00} the statement's cast to {@code integer} would refuse,
   * failing the whole batch; a {@code double precision} key's {@code 1.2345678E7} is {@code
   * 12345678}); for other types, the id as it is, but a {@code character(n)} key's padding dropped
   * for a column of another type, as PostgreSQL compares them ({@code 'AB '} is the {@code varchar}
   * child's {@code 'AB'}); none for a {@code character(n)} column and a key of another type ending
   * in a space.
   */
  public Optional<String> asColumnValue(String id) {
    if (BPCHAR.equals(parentKeyType) && !BPCHAR.equals(columnType)) {
      id = id.replaceFirst(" +$", "");
    }
    if (BPCHAR.equals(columnType) && !BPCHAR.equals(parentKeyType) && id.endsWith(" ")) {
      // A character(n) column holds no value of its own with trailing spaces, and compares
      // without them: asked for 'AB ', it would give the children of a live 'AB'.
      return Optional.empty();
    }
    BigInteger max =
        switch (columnType) {
          case "smallint" -> BigInteger.valueOf(Short.MAX_VALUE);
          case "integer" -> BigInteger.valueOf(Integer.MAX_VALUE);
          case "bigint" -> BigInteger.valueOf(Long.MAX_VALUE);
          default -> null;
        };
    if (max == null) {
      return Optional.of(id);
    }
    boolean floating = FLOATING.contains(parentKeyType);
    // Only a floating-point key's text has an exponent, and only up to 308: one read as written
    // elsewhere (1e999999999 in a text key) would make BigDecimal build a number of that size.
    if (!(floating ? FLOAT : NUMBER).matcher(id).matches()) {
      return Optional.empty();
    }
    BigInteger v;
    try {
      v = new BigDecimal(id).toBigIntegerExact();
    } catch (ArithmeticException e) {
      return Optional.empty(); // a fraction: no integer equals it
    }
    boolean fits = v.compareTo(max) <= 0 && v.compareTo(max.negate().subtract(BigInteger.ONE)) >= 0;
    return fits ? Optional.of(v.toString()) : Optional.empty();
  }

  /** A number as a numeric or floating-point key's text gives it; nothing NaN or infinite. */
  private static final Pattern NUMBER = Pattern.compile("-?[0-9]+(\\.[0-9]+)?");

  /** A number as a floating-point key's text gives it ({@code 1.2345678E7}). */
  private static final Pattern FLOAT =
      Pattern.compile("-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]{1,3})?");

  /** The floating-point types, as {@code format_type} names them. */
  private static final java.util.Set<String> FLOATING =
      java.util.Set.of("real", "double precision");

  /** {@code character(n)}'s type name without its modifier, as {@code format_type} gives it. */
  private static final String BPCHAR = "bpchar";
}
