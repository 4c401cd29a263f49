/*
 * hdf5_exit.h - how a program that reads untrusted HDF5 files lets HDF5 go at exit (not part of
 * the installed API: src/cli/ampdiag.c calls it first thing in main).
 */
#ifndef AMPDIAG_HDF5_EXIT_H
#define AMPDIAG_HDF5_EXIT_H

/*
 * HDF5 1.10.8 loses a free-list block each time a metadata checksum fails (a corrupt file:
 * H5C_protect, tests/valgrind-hdf5.supp). Its shutdown at exit then never sees the free lists
 * empty, gives up after 100 rounds and prints "HDF5: infinite loop closing library" and a line
 * of package names on stderr, whatever the program did. trace_hdf5_exit_setup (before any
 * other HDF5 call) replaces HDF5's own exit handler by one that shuts HDF5 down only when a file
 * is still open (to flush and close it); otherwise the operating system takes HDF5's memory back
 * and nothing is printed. Every HDF5 object ampdiag opens is closed before exit either way.
 */
void trace_hdf5_exit_setup(void);

#endif
