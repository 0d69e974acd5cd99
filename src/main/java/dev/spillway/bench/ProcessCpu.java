package dev.spillway.bench;

import com.sun.management.OperatingSystemMXBean;
import java.lang.management.ManagementFactory;

/** CPU time of the Java process it runs in. */
final class ProcessCpu {
  private ProcessCpu() {}

  /** CPU seconds this process has used so far, all its threads together. */
  static double seconds() {
    return ManagementFactory.getPlatformMXBean(OperatingSystemMXBean.class).getProcessCpuTime()
        / 1e9;
  }
}
