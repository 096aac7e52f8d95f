! What every kernel shares: MPI (through mpif.h, the one MPI Fortran binding every Fortran
! compiler reads: module files are compiler-specific), the timed section's clock, the
! summary file (key=value lines, written by rank 0) and the verification report, which
! names the value, what the specification expects and what the run got.
module npb_common
  use npb_random, only: dp
  implicit none
  include 'mpif.h'
  private
  public :: dp, npb_init, npb_finish, me, nprocs, comm, mpi_double_precision, mpi_sum, &
    mpi_max, mpi_integer, mpi_in_place, mpi_double_complex, mpi_status_size, &
    put, put_int, put_text, check_rel, timed_start, timed_stop, is_power_of_two, npb_abort, &
    say, all_verified, report_head, report_tail

  integer, protected :: me = 0, nprocs = 1, comm = mpi_comm_world
  integer :: summary_unit = -1
  logical :: all_verified = .true.
  real(dp) :: t_start

contains

  subroutine npb_init(summary)
    character(*), intent(in) :: summary
    integer :: ierr
    call mpi_init(ierr)
    comm = mpi_comm_world
    call mpi_comm_rank(comm, me, ierr)
    call mpi_comm_size(comm, nprocs, ierr)
    if (me == 0) open (newunit=summary_unit, file=summary, status='replace', action='write')
  end subroutine npb_init

  subroutine npb_finish()
    integer :: ierr
    if (me == 0) close (summary_unit)
    call mpi_finalize(ierr)
  end subroutine npb_finish

  subroutine npb_abort(msg)
    character(*), intent(in) :: msg
    integer :: ierr
    if (me == 0) write (*, '(a)') 'npb: error: '//msg
    call mpi_abort(comm, 2, ierr)
  end subroutine npb_abort

  subroutine say(msg)
    character(*), intent(in) :: msg
    if (me == 0) write (*, '(a)') msg
  end subroutine say

  subroutine put(key, val)
    character(*), intent(in) :: key
    real(dp), intent(in) :: val
    if (me == 0) write (summary_unit, '(a,"=",es24.16e3)') key, val
  end subroutine put

  subroutine put_int(key, val)
    character(*), intent(in) :: key
    integer, intent(in) :: val
    character(24) :: s
    write (s, '(i0)') val
    if (me == 0) write (summary_unit, '(a,"=",a)') key, trim(s)
  end subroutine put_int

  subroutine put_text(key, val)
    character(*), intent(in) :: key, val
    if (me == 0) write (summary_unit, '(a,"=",a)') key, val
  end subroutine put_text

  !> |got - expected| / |expected| <= eps, the specification's test. A failure is one line
  !> naming the value, the expected and the got.
  subroutine check_rel(name, got, expected, eps, ok)
    character(*), intent(in) :: name
    real(dp), intent(in) :: got, expected, eps
    logical, intent(inout) :: ok
    real(dp) :: err
    err = abs(got - expected) / abs(expected)
    if (.not. (err <= eps)) then
      ok = .false.
      all_verified = .false.
      if (me == 0) write (*, '(a,a,a,es23.15e3,a,es23.15e3,a,es9.2,a,es9.2,a)') &
        ' VERIFICATION FAILED: ', name, ' = ', got, ', expected ', expected, &
        ' (relative error ', err, ' > ', eps, ')'
    end if
  end subroutine check_rel

  !> Start of a timed section: every rank starts together.
  subroutine timed_start()
    integer :: ierr
    call mpi_barrier(comm, ierr)
    t_start = mpi_wtime()
  end subroutine timed_start

  !> End of a timed section: the slowest rank's time.
  function timed_stop() result(t)
    real(dp) :: t, mine
    integer :: ierr
    mine = mpi_wtime() - t_start
    call mpi_allreduce(mine, t, 1, mpi_double_precision, mpi_max, comm, ierr)
  end function timed_stop

  !> The first line of a kernel's report.
  subroutine report_head(kernel, cls)
    character(*), intent(in) :: kernel
    character, intent(in) :: cls
    if (me == 0) write (*, '(/,1x,a," Benchmark Results (class ",a,", ",i0," ranks)")') &
      kernel, cls, nprocs
  end subroutine report_head

  !> The last lines of a kernel's report, and its verdict, seconds and Mop/s in the summary
  !> (KEY_verified, KEY_seconds, KEY_mops).
  subroutine report_tail(key, t, mops, ok)
    character(*), intent(in) :: key
    real(dp), intent(in) :: t, mops
    logical, intent(in) :: ok
    if (me == 0) then
      write (*, '(" Time in seconds = ",f12.4,"  Mop/s total = ",f12.2)') t, mops
      write (*, '(" Verification = ",a)') merge('SUCCESSFUL  ', 'UNSUCCESSFUL', ok)
    end if
    call put_int(key//'_verified', merge(1, 0, ok))
    call put(key//'_seconds', t)
    call put(key//'_mops', mops)
  end subroutine report_tail

  pure logical function is_power_of_two(n)
    integer, intent(in) :: n
    is_power_of_two = n > 0 .and. iand(n, n - 1) == 0
  end function is_power_of_two

end module npb_common
