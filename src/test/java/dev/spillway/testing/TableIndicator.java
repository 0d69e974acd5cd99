package dev.spillway.testing;

import dev.spillway.event.TableName;
import dev.spillway.health.Health;
import dev.spillway.health.HealthIndicator;
import java.sql.Connection;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A per-table indicator set by hand, under the name of a real one: every table it is read for reads
 * what it was last set to. Thread-safe.
 */
public final class TableIndicator implements HealthIndicator {
  private final String name;
  private final AtomicReference<Health> value;

  public TableIndicator(String name, Health initial) {
    this.name = name;
    this.value = new AtomicReference<>(initial);
  }

  public void set(Health health) {
    value.set(health);
  }

  @Override
  public String name() {
    return name;
  }

  @Override
  public boolean perTable() {
    return true;
  }

  @Override
  public Health sample(Connection connection, TableName table) {
    return value.get();
  }
}
