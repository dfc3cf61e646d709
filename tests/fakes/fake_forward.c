/* SPDX-License-Identifier: MIT */
/* A fake libibverbs.so.1 that defines nothing and only NEEDs rdmadl's own
 * drop-in library: every dlvsym through its handle finds rdmadl's stubs (its
 * dependencies are in the handle's scope). rdmadl must see that each of
 * them is its own and bind none, instead of calling itself forever. */
int fake_forward_marker;
