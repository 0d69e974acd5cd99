package dev.spillway.health;

import dev.spillway.event.TableName;
import java.sql.Connection;
import java.util.concurrent.atomic.AtomicReference;

/** An indicator set by hand: an operator's switch, or a benchmark's STOP signal. Thread-safe. */
public final class ManualIndicator implements HealthIndicator {
  private final AtomicReference<Health> value = new AtomicReference<>(Health.NORMAL);

  public void set(Health health) {
    value.set(health);
  }

  @Override
  public String name() {
    return "manual";
  }

  @Override
  public Health sample(Connection connection, TableName table) {
    return value.get();
  }
}
