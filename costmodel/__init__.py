"""The GPU cost model: how a node is priced, and how a device's table is fitted.

Pricing: a *query* (:mod:`.queries`) is a node (its signature, :mod:`.signatures`, made from a
torch.fx node by :mod:`.fx`, the one module here that imports torch) read and written in a
pair of representations, or a transition; a device's table (:mod:`.table`, which reads and
writes its file) prices it, measured where the device ran that very node, else by its model,
a :class:`.model.CostModel` (:mod:`.per_operator`, :mod:`.gradient_boosted` over
:mod:`.features`, :mod:`.transferred`); :mod:`.prediction` adds a program's prices up;
:mod:`.pricing` is what an optimiser needs of whatever prices (a table, or the coverage rounds'
stand-in); :mod:`.device_limits`, what makes a layout illegal on the device.

Fitting: :mod:`.measurements` (what a device's runs measured, their file, and models left out
of them in turn), :mod:`.fit` (the table of them, or a new device's transferred from another
device's, with the error it is expected to make on models it never saw) and
:mod:`.program_choice` (which programs a new device runs first).

Of ours, it imports only the shared kernel (:mod:`layoutkit`), with no import cycle among its
modules: strategies and the harness import it, and hand a table to what prices with it.
"""
